// tests/apps/job_control.h: a launcher run as a child process whose output a test reads as it
// comes, its ranks found by their environment (to kill or stop one at a chosen moment), and the
// writes onto a checkpoint counted as they happen.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/apps/train_fixture.h"

namespace engine::testing {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// pid -> parent pid, for every process.
inline std::map<pid_t, pid_t> parents() {
  std::map<pid_t, pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(e.path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 4 >= stat.size()) continue;
    out[std::stoi(name)] = std::stoi(stat.substr(paren + 4));  // ") S PPID ..."
  }
  return out;
}

// Every process below root (children, grandchildren, ...).
inline std::vector<pid_t> descendants(pid_t root) {
  const std::map<pid_t, pid_t> pp = parents();
  std::set<pid_t> found{root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, parent] : pp)
      if (found.count(parent) && found.insert(pid).second) grew = true;
  }
  found.erase(root);
  return {found.begin(), found.end()};
}

inline bool has_env(pid_t pid, const std::string& entry) {
  const std::string env = read_text("/proc/" + std::to_string(pid) + "/environ");
  size_t at = 0;
  while (at < env.size()) {
    const size_t end = std::min(env.find('\0', at), env.size());
    if (env.compare(at, end - at, entry) == 0) return true;
    at = end + 1;
  }
  return false;
}

// A launcher run as a child: stdout and stderr into one pipe, read as it comes.
class Job {
 public:
  explicit Job(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe";
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    started_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {  // async-signal-safe calls only
      setpgid(0, 0);
      if (dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0) _exit(99);
      execv(cargv[0], cargv.data());
      _exit(98);
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }
  ~Job() {
    if (pid_ > 0) {  // the test failed half way: leave nothing behind
      for (pid_t p : descendants(pid_)) ::kill(p, SIGKILL);
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& output() const { return out_; }

  // Reads what is there, waiting up to timeout_ms for something; false at end of output.
  bool pump(int timeout_ms) {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return true;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) {
      ::close(fd_);
      fd_ = -1;
      return false;
    }
    out_.append(buf, static_cast<size_t>(n));
    return true;
  }

  // Waits until the output holds `text` (true), or the output ends or timeout_s passes (false).
  bool wait_for_output(const std::string& text, double timeout_s) {
    const auto t0 = Clock::now();
    while (out_.find(text) == std::string::npos) {
      if (!pump(50) || since(t0) > timeout_s) return out_.find(text) != std::string::npos;
    }
    return true;
  }

  // Reads to the end and reaps the launcher: its exit code (128 + signal), or -1 after timeout_s.
  int finish(double timeout_s) {
    while (pump(50) && since(started_) < timeout_s) {
    }
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) != pid_) {
      if (since(started_) > timeout_s) return -1;  // the destructor kills it
      pump(20);
    }
    pid_ = -1;
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
  Clock::time_point started_;
};

// The train process of `rank` in its first start (TORCHELASTIC_RESTART_COUNT=0) below `root`.
inline pid_t find_rank(pid_t root, int rank) {
  const fs::path train = fs::canonical(kTrain);
  for (pid_t p : descendants(root)) {
    std::error_code ec;  // a process may be gone by now
    const fs::path exe = fs::read_symlink("/proc/" + std::to_string(p) + "/exe", ec);
    if (!ec && exe == train && has_env(p, "RANK=" + std::to_string(rank)) &&
        has_env(p, "TORCHELASTIC_RESTART_COUNT=0"))
      return p;
  }
  return -1;
}

// Counts the renames onto one file in a folder (io/atomic_file's writes end with one).
class WriteWatch {
 public:
  WriteWatch(const std::string& folder, const std::string& name) : name_(name) {
    fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    EXPECT_GE(fd_, 0);
    EXPECT_GE(inotify_add_watch(fd_, folder.c_str(), IN_MOVED_TO), 0);
  }
  ~WriteWatch() { ::close(fd_); }
  WriteWatch(const WriteWatch&) = delete;
  WriteWatch& operator=(const WriteWatch&) = delete;

  // Waits until the file has been written n times in all, reading the job's output meanwhile.
  bool wait_for_writes(int n, Job& job, double timeout_s) {
    const auto t0 = Clock::now();
    while (writes_ < n && since(t0) < timeout_s) {
      job.pump(0);
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      alignas(inotify_event) char buf[4096];
      const ssize_t len = ::read(fd_, buf, sizeof buf);
      for (ssize_t at = 0; at < len;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
        if (e->len > 0 && name_ == e->name) ++writes_;
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
    return writes_ >= n;
  }

 private:
  int fd_ = -1;
  int writes_ = 0;
  std::string name_;
};

// Lines of `out` (launcher prefixes dropped) that start with `head` ("Rank 0, epoch"), progress
// lines left out.
inline std::vector<std::string> lines_starting(const std::string& out, const std::string& head) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    const size_t at = l.find(head);
    const bool progress = l.find(", batch ") != std::string::npos;
    if (at != std::string::npos && !progress) lines.push_back(l.substr(at));
  }
  return lines;
}

// A command line cut at its spaces (no argument here holds one).
inline std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace engine::testing
