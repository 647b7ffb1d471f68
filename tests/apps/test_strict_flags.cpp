// tests/apps/test_strict_flags.cpp: numbers on the command line and in the environment are parsed
// strictly (no overflow clamped, no infinity, ports 1 .. 65535, threads up to 1024), unknown
// init-method schemes are refused whatever the world size, and an empty training set is refused
// naming its file. Each mistake ends the program at once with one line on stderr naming the flag,
// the variable or the file: exit 2 for a flag, 1 for the environment or a file.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/apps/train_fixture.h"

namespace engine::testing {
namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

// Runs `env build/apps/<program> <args>`, stdout and stderr apart, and times it.
Outcome run_apart(const std::string& program, const std::string& args,
                  const std::string& env = "") {
  const TempDir dir;
  const std::string cmd = "env " + env + " " + kBuild + "/apps/" + program + " " + args + " > " +
                          dir.file("out") + " 2> " + dir.file("err") + " < /dev/null";
  const auto t0 = std::chrono::steady_clock::now();
  const int st = std::system(cmd.c_str());
  Outcome r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = read_text(dir.file("out"));
  r.err = read_text(dir.file("err"));
  return r;
}

// One line on stderr, holding every part; the given exit code; at once.
void expect_refused(const Outcome& r, int code, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.code, code) << r.err << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
  for (const std::string& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "'" << r.err << "' lacks '" << p << "'";
  EXPECT_LT(r.seconds, 10.0) << r.err;
  std::printf("[message] %s", r.err.c_str());
}

class StrictFlags : public TrainTest {
 protected:
  std::string train_args(const std::string& extra) const {
    return "--model linear --steps 2 --batch-size 32 --data-dir " + data_ + " " + extra;
  }
};

TEST_F(StrictFlags, LearningRateMustBeFinite) {
  for (const std::string v : {"inf", "nan", "-inf", "1e999"})
    expect_refused(run_apart("train", train_args("--lr " + v)), 2,
                   {"train: --lr: '" + v + "' is not a finite number"});
}

TEST_F(StrictFlags, OverflowingIntegersAreRefusedNotClamped) {
  expect_refused(run_apart("train", train_args("--epochs 99999999999999999999")), 2,
                 {"--epochs: '99999999999999999999' is out of range"});
  expect_refused(run_apart("train", train_args("--steps -99999999999999999999")), 2,
                 {"--steps: '-99999999999999999999' is out of range"});
}

TEST_F(StrictFlags, ThreadsAreBoundedAtOnce) {
  const Outcome r = run_apart("train", train_args("--threads 100000"));
  expect_refused(r, 2, {"--threads must be 0 .. 1024, got 100000"});
  EXPECT_LT(r.seconds, 2.0);
  expect_refused(run_apart("train", train_args(""), "ENGINE_THREADS=abc"), 1,
                 {"ENGINE_THREADS=abc: expected an integer 1 .. 1024"});
  expect_refused(run_apart("train", train_args(""), "ENGINE_THREADS=5000"), 1,
                 {"ENGINE_THREADS=5000: expected an integer 1 .. 1024"});
}

TEST_F(StrictFlags, MasterPortOutOfRangeIsRefusedNamingTheVariable) {
  for (const std::string port : {"99999", "0", "65536", "-1", "http"}) {
    const Outcome r = run_apart("train", train_args("--timeout 60"),
                                "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port);
    expect_refused(r, 1, {"MASTER_PORT"});
    if (port != "http") {
      EXPECT_NE(r.err.find("a port must be 1 .. 65535"), std::string::npos);
    }
  }
}

TEST_F(StrictFlags, TcpInitMethodPortOutOfRangeIsAUsageError) {
  expect_refused(
      run_apart("train", train_args("--init-method tcp://127.0.0.1:99999 --rank 0 --world-size 2")),
      2, {"--init-method", "tcp://127.0.0.1:99999", "a port must be 1 .. 65535"});
}

TEST_F(StrictFlags, UnknownInitMethodSchemeIsRefusedWhateverTheWorldSize) {
  for (const std::string extra : {"", "--world-size 1", "--world-size 2 --rank 0"})
    expect_refused(run_apart("train", train_args("--init-method bogus://x " + extra)), 2,
                   {"--init-method", "unknown init method 'bogus://x'"});
}

TEST_F(StrictFlags, EmptyTrainingSetIsRefusedNamingTheFile) {
  const std::string empty = (dir_ / "empty").string();
  write_dataset(empty, 0, 20);
  const Outcome r = run_apart("train", "--model linear --epochs 1 --data-dir " + empty);
  expect_refused(r, 1,
                 {empty + "/train-images-idx3-ubyte.gz: the training set is empty (0 images)"});
}

// apps/flags refuses overflowing and non-finite numbers for every program (gpu_selftest's only
// numbers are those of --child, the two-rank checks' child processes).
TEST(StrictFlagsEveryProgram, NumbersOverflowOrNotFiniteExitTwoNamingTheFlag) {
  struct Case {
    const char *program, *args, *flag;
  };
  const Case cases[] = {
      {"train", "--batch-size 99999999999999999999", "--batch-size"},
      {"train", "--momentum nan", "--momentum"},
      {"launch", "--nproc-per-node 99999999999999999999 -- true", "--nproc-per-node"},
      {"ring_demo", "--count 99999999999999999999", "--count"},
      {"ring_demo", "--alpha-us inf", "--alpha-us"},
      {"trace_svg", "--in a.json --out a.svg --width inf", "--width"},
      {"trace_svg", "--in a.json --out a.svg --width 99999999999999999999", "--width must be"},
      {"trace_svg", "--in a.json --out a.svg --steps 99999999999999999999:1", "--steps"},
      {"allreduce_bench", "--iters 99999999999999999999", "--iters"},
      {"allreduce_bench", "--step-factor nan", "--step-factor"},
      {"allreduce_bench", "--max-bytes 99999999999G",
       "--max-bytes: '99999999999G' is out of range"},
      {"allreduce_bench", "--timeout 9999999999999", "--timeout must be in (0, 604800] seconds"},
      {"bench_kernels", "--threads 99999999999999999999", "--threads"},
      {"bench_kernels", "--threads 100000", "--threads must be 0 .. 1024"},
      {"gpu_selftest", "--child ring x 2 /tmp", "--child RANK: 'x' is not an integer"},
      {"gpu_selftest", "--child ring 0 99999999999999999999 /tmp", "--child WORLD"},
      {"gpu_selftest", "--child ring 2 2 /tmp", "--child RANK must be 0 .. 1"},
      {"gpu_selftest", "--child ring 0 2", "--child takes BACKEND RANK WORLD DIR"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.program) + " " + c.args);
    const Outcome r = run_apart(c.program, c.args);
    expect_refused(r, 2, {std::string(c.program) + ": " + c.flag});
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
}  // namespace engine::testing
