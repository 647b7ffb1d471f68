// apps/allreduce_bench/spawn.cpp: fork, then reap the children with waitpid.
#include "apps/allreduce_bench/spawn.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"

namespace engine::allreduce_bench {

int spawn_ranks(int world, const std::function<int(int)>& rank_main, int grace_s) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      ENGINE_FAIL("fork of rank ", r, ": ", std::strerror(err));
    }
    if (pid == 0) {
      int code = rank_main(r);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }

  int first_failure = 0, left = world;
  std::vector<bool> done(world, false);
  auto kill_at = std::chrono::steady_clock::time_point::max();
  while (left > 0) {
    int st = 0;
    pid_t got = waitpid(-1, &st, WNOHANG);
    if (got > 0) {
      for (int r = 0; r < world; ++r) {
        if (pids[r] != got) continue;
        done[r] = true;
        --left;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code != 0 && first_failure == 0) {
          first_failure = code;
          std::fprintf(stderr, "allreduce_bench: rank %d failed (exit %d)\n", r, code);
          kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
        }
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > kill_at) {
      for (int r = 0; r < world; ++r)
        if (!done[r]) kill(pids[r], SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return first_failure;
}

}  // namespace engine::allreduce_bench
