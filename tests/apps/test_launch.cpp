// tests/apps/test_launch.cpp: the `launch` program, run as a process with /bin/sh ranks:
// environment, prefixed output, failure handling, signal forwarding, no process left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/temp_dir.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using engine::testing::read_text;
using Clock = std::chrono::steady_clock;

const std::string kLaunch = std::string(ENGINE_BUILD_DIR) + "/apps/launch";

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A zombie counts as gone: it is dead and waits only for its new parent to reap it.
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

int expected_threads(int nproc) {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  return std::max(1, CPU_COUNT(&set) / nproc);
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

class LaunchTest : public ::testing::Test {
 protected:
  struct Result {
    int code = -1;  // launch's exit code; 128 + signal if it was killed
    std::string out, err;
    double seconds = 0;
  };

  void SetUp() override {
    ASSERT_TRUE(fs::exists(kLaunch)) << kLaunch << " is missing: build the `launch` target";
  }

  // Starts launch with `args`, stdout and stderr to files, `env` added to the environment.
  pid_t start(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv_s{kLaunch}, env_s(env);
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);  // the first one wins
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    for (auto& e : env_s) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
    started_ = Clock::now();
    const pid_t pid = fork();
    if (pid == 0) {  // async-signal-safe calls only: the test process may have threads
      const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(99);
      execve(argv[0], argv.data(), envp.data());
      _exit(98);
    }
    return pid;
  }

  // Waits for launch to exit (killing it and failing after timeout_s) and collects its output.
  Result finish(pid_t pid, double timeout_s = 30) {
    Result r;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) != pid) {
      if (since(started_) > timeout_s) {
        ::kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ADD_FAILURE() << "launch ran past " << timeout_s << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    r.seconds = since(started_);
    r.code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    r.out = read_text(dir_ / "out");
    r.err = read_text(dir_ / "err");
    return r;
  }

  Result launch(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return finish(start(args, env));
  }

  // Shell code: record this rank's shell pid in pid.$RANK (atomically, by rename).
  std::string record_pid() const {
    const std::string p = (dir_ / "pid.").string();
    return "echo $$ > " + p + "$RANK.tmp && mv " + p + "$RANK.tmp " + p + "$RANK; ";
  }
  // Shell code: wait until n ranks have recorded their pids.
  std::string await_pids(int n) const {
    return "while [ $(ls " + dir_.string() + " | grep -c '^pid\\.[0-9]*$') -lt " +
           std::to_string(n) + " ]; do sleep 0.02; done; ";
  }

  // The pids recorded in pid.* files, waiting up to timeout_s for n of them.
  std::vector<pid_t> recorded_pids(size_t n, double timeout_s = 10) {
    const auto t0 = Clock::now();
    for (;;) {
      std::vector<pid_t> pids;
      for (const auto& e : fs::directory_iterator(dir_)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("pid.", 0) != 0 || name.find(".tmp") != std::string::npos) continue;
        pids.push_back(std::stoi(read_text(e.path())));
      }
      if (pids.size() >= n) return pids;
      if (since(t0) > timeout_s) {
        ADD_FAILURE() << "only " << pids.size() << " of " << n << " ranks recorded their pid";
        return pids;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Every pid must be gone, allowing within_s for the kernel to finish them off.
  void expect_gone(const std::vector<pid_t>& pids, double within_s = 1.0) {
    const auto t0 = Clock::now();
    for (pid_t p : pids) {
      while (alive(p) && since(t0) < within_s)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_FALSE(alive(p)) << "process " << p << " was left behind";
    }
  }

  engine::testing::TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
  Clock::time_point started_;
};

TEST_F(LaunchTest, SetsTorchrunVariablesForEveryRank) {
  const Result r =
      launch({"--nproc-per-node", "2", "--nnodes", "3", "--node-rank", "1", "--master-addr",
              "10.1.2.3", "--master-port", "4321", "--", "/bin/sh", "-c",
              "echo R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE "
              "G=$GROUP_RANK N=$NODE_RANK A=$MASTER_ADDR P=$MASTER_PORT "
              "T=$ENGINE_THREADS"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string t = std::to_string(expected_threads(2));
  for (int local = 0; local < 2; ++local) {
    const std::string rank = std::to_string(2 + local);
    const std::string want = "[rank " + rank + "] R=" + rank + " W=6 L=" + std::to_string(local) +
                             " LW=2 G=1 N=1 A=10.1.2.3 P=4321 T=" + t + "\n";
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing: " << want << "in:\n" << r.out;
  }
  EXPECT_EQ(lines_of(r.out).size(), 2u) << r.out;
}

TEST_F(LaunchTest, DefaultsAndAnInheritedEngineThreads) {
  const Result r = launch({"--nproc-per-node=1", "/bin/sh", "-c",
                           "echo $RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT $ENGINE_THREADS"},
                          {"ENGINE_THREADS=7", "RANK=99"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] 0 1 127.0.0.1 29500 7\n");
}

TEST_F(LaunchTest, PrefixesWholeLinesOfStdoutAndStderr) {
  const Result r = launch({"--nproc-per-node", "1", "--", "/bin/sh", "-c",
                           "printf 'one\\ntw'; sleep 0.1; printf 'o\\n'; echo bad >&2; "
                           "printf '10%%\\r50%%\\rdone\\r\\n'; printf 'no newline'"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "[rank 0] one\n[rank 0] two\n[rank 0] 10%\r[rank 0] 50%\r[rank 0] done\r\n"
            "[rank 0] no newline\n");
  EXPECT_EQ(r.err, "[rank 0] bad\n");
}

TEST_F(LaunchTest, LinesOfManyRanksNeverMix) {
  const Result r = launch({"--nproc-per-node", "4", "--", "/bin/sh", "-c",
                           "i=0; while [ $i -lt 500 ]; do echo \"$RANK " + std::string(200, 'x') +
                               " $i\"; i=$((i+1)); done"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = lines_of(r.out);
  EXPECT_EQ(lines.size(), 2000u);
  const std::string x(200, 'x');
  for (const auto& l : lines) {
    // "[rank R] R xxx...x I": the rank in the prefix and in the text agree, the line is whole.
    ASSERT_GE(l.size(), 11u + x.size() + 2) << l.substr(0, 80);
    const std::string rank = l.substr(6, 1);
    ASSERT_EQ(l.substr(0, 11 + x.size() + 1), "[rank " + rank + "] " + rank + " " + x + " ")
        << l.substr(0, 80);
    const std::string i = l.substr(11 + x.size() + 1);
    ASSERT_TRUE(!i.empty() && i.find_first_not_of("0123456789") == std::string::npos) << l;
  }
}

TEST_F(LaunchTest, FailingRankStopsTheOthersAndGivesItsCode) {
  const Result r = launch({"--nproc-per-node", "3", "--", "/bin/sh", "-c",
                           record_pid() + await_pids(3) +
                               "if [ $RANK = 1 ]; then echo dying >&2; exit 3; fi; exec sleep 30"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_LT(r.seconds, 4.0);
  EXPECT_NE(r.err.find("[rank 1] dying\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("launch: rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with code 3"), std::string::npos) << r.err;
  // The failing rank's last words come before launch's note about it.
  EXPECT_LT(r.err.find("[rank 1] dying"), r.err.find("launch: rank 1")) << r.err;
  expect_gone(recorded_pids(3, 0));
}

TEST_F(LaunchTest, RankKilledBySignalGives128PlusSignal) {
  const Result r = launch({"--nproc-per-node", "2", "--", "/bin/sh", "-c",
                           "if [ $RANK = 0 ]; then sleep 0.2; kill -9 $$; fi; exec sleep 30"});
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
  EXPECT_LT(r.seconds, 4.0);
  EXPECT_NE(r.err.find("launch: rank 0 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal 9"), std::string::npos) << r.err;
}

TEST_F(LaunchTest, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  const Result r = launch({"--nproc-per-node", "3", "--grace-period", "0.5", "--", "/bin/sh", "-c",
                           "trap '' TERM; " + record_pid() + await_pids(3) +
                               "if [ $RANK = 2 ]; then exit 5; fi; exec sleep 30"});
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_GT(r.seconds, 0.5);
  EXPECT_LT(r.seconds, 4.0);
  EXPECT_NE(r.err.find("sending SIGKILL"), std::string::npos) << r.err;
  expect_gone(recorded_pids(3, 0));
}

TEST_F(LaunchTest, LeftoverProcessesOfARankAreKilled) {
  // Each rank starts a background sleep and exits 0; the sleeps must not outlive launch.
  const std::string p = (dir_ / "pid.").string();
  const Result r = launch({"--nproc-per-node", "2", "--", "/bin/sh", "-c",
                           "sleep 30 > /dev/null 2>&1 & echo $! > " + p + "$RANK"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 4.0);
  expect_gone(recorded_pids(2, 0));
}

TEST_F(LaunchTest, SigtermToLaunchIsForwardedAndRanksAreReaped) {
  const pid_t pid = start(
      {"--nproc-per-node", "2", "--", "/bin/sh", "-c",
       "trap 'echo got TERM; exit 7' TERM; " + record_pid() + "while :; do sleep 0.05; done"});
  const auto pids = recorded_pids(2);
  ::kill(pid, SIGTERM);
  const Result r = finish(pid);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.out.find("[rank 0] got TERM\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1] got TERM\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("got signal 15"), std::string::npos) << r.err;
  expect_gone(pids);
}

TEST_F(LaunchTest, KilledLaunchTakesItsRanksWithIt) {
  const pid_t pid =
      start({"--nproc-per-node", "2", "--", "/bin/sh", "-c", record_pid() + "exec sleep 30"});
  const auto pids = recorded_pids(2);
  ::kill(pid, SIGKILL);
  finish(pid);
  expect_gone(pids, 5.0);  // PR_SET_PDEATHSIG: the kernel kills them
}

TEST_F(LaunchTest, ProgramThatCannotStartFailsTheJob) {
  const Result r = launch({"--nproc-per-node", "2", "--", "/nonexistent/program"});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("cannot run '/nonexistent/program'"), std::string::npos) << r.err;
}

TEST_F(LaunchTest, HelpAndBadFlags) {
  Result r = launch({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: launch --nproc-per-node N"), std::string::npos) << r.out;

  const std::vector<std::vector<std::string>> bad = {
      {"--bogus", "1", "--", "true"},
      {"--", "true"},                                               // no --nproc-per-node
      {"--nproc-per-node", "0", "--", "true"},                      // too few
      {"--nproc-per-node", "two", "--", "true"},                    // not a number
      {"--nproc-per-node", "2", "--node-rank", "1", "--", "true"},  // node rank >= nnodes
      {"--nproc-per-node", "2", "--master-port", "70000", "--", "true"},
      {"--nproc-per-node", "2"},  // no program
      {"--nproc-per-node"},       // no value
  };
  for (const auto& args : bad) {
    r = launch(args);
    EXPECT_EQ(r.code, 2) << args[0];
    EXPECT_EQ(r.err.rfind("launch: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("launch --help"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
