// tests/comm/comm_test_util.h: helpers for the comm tests - ranks as threads, values unique to rank
// and position, forked ranks as processes.
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace engine::comm::testing {

// Runs fn(rank) on `world` threads; returns each rank's error message ("" = none).
inline std::vector<std::string> run_threads(int world, const std::function<void(int)>& fn) {
  std::vector<std::string> errs(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errs[r] = e.what();
        if (errs[r].empty()) errs[r] = "(empty error)";
      }
    });
  for (auto& t : ts) t.join();
  return errs;
}

// Fails the test with every rank's error.
inline void expect_no_errors(const std::vector<std::string>& errs) {
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r << " failed";
}

// Exactly representable, distinct per position (period 65521, a prime) and per rank; sums of 8
// stay below 2^24.
inline float fval(int rank, size_t i) {
  return static_cast<float>((i % 65521) * 8 + rank);
}
inline int64_t ival(int rank, size_t i) {
  return static_cast<int64_t>(i) * 16 + rank;
}

// Waits for every child in `pids`; returns each one's exit code (or 128 + signal). Children still
// running after timeout_s are killed (and reported as 128 + SIGKILL).
inline std::vector<int> wait_children(const std::vector<pid_t>& pids, int timeout_s) {
  const int world = static_cast<int>(pids.size());
  std::vector<int> codes(world, -1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int left = world;
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      if (codes[r] != -1) continue;
      int st = 0;
      pid_t got = waitpid(pids[r], &st, WNOHANG);
      if (got == pids[r]) {
        codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < world; ++r)
        if (codes[r] == -1) kill(pids[r], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return codes;
}

// Forked ranks: fn(rank) runs in a child that exits 0 on success, 1 with the message on stderr on
// an exception. Returns each child's exit code (or 128 + signal). Children still running at the
// deadline are killed (and reported as 128 + SIGKILL).
inline std::vector<int> run_processes(int world, const std::function<void(int)>& fn,
                                      int timeout_s = 30) {
  std::vector<pid_t> pids;
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        fn(r);
      } catch (const std::exception& e) {
        fprintf(stderr, "[rank %d] %s\n", r, e.what());
        code = 1;
      }
      fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  return wait_children(pids, timeout_s);
}

// A port that was free a moment ago.
int free_port();

}  // namespace engine::comm::testing
