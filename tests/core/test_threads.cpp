// tests/core/test_threads.cpp: the default thread count of a rank (core/threads.h).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/threads.h"
#include "io/error.h"
#include "tests/common/scoped_env.h"

using namespace engine;

namespace {

// scheduler_tasks < 0: no scheduler count given. ENGINE_THREADS comes from the process
// (core/knobs.h), unset here unless a test sets it; the launchers' variables from vars.
int threads_with(const std::map<std::string, std::string>& vars, int cores,
                 int scheduler_tasks = -1) {
  const EnvLookup env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  if (scheduler_tasks < 0) return default_threads(env, cores);
  return default_threads(env, cores, [&] { return scheduler_tasks; });
}

}  // namespace

TEST(DefaultThreads, EngineThreadsThenOmpNumThreadsWin) {
  {
    test_env::ScopedEnv three("ENGINE_THREADS", "3");
    EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "1"}}, 16), 3);
  }
  test_env::ScopedEnv empty("ENGINE_THREADS", "");
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "1"}, {"LOCAL_WORLD_SIZE", "2"}}, 16), 1);
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "4,2"}}, 16), 4);
  // OMP_NUM_THREADS is shared with other software: a value that is not a positive integer is
  // skipped, as libgomp does; an empty ENGINE_THREADS is unset.
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "x"}}, 16), 16);
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "-2"}}, 16), 16);
}

TEST(DefaultThreads, CoresSharedByTheRanksOfThisHost) {
  test_env::ScopedEnv unset("ENGINE_THREADS", nullptr);
  EXPECT_EQ(threads_with({}, 16), 16);
  EXPECT_EQ(threads_with({{"LOCAL_WORLD_SIZE", "4"}}, 16), 4);
  EXPECT_EQ(threads_with({{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}, 16), 5);
  EXPECT_EQ(threads_with({{"LOCAL_WORLD_SIZE", "8"}}, 2), 1) << "at least 1";
}

// The job scheduler's count of this node's tasks (train passes Slurm's, comm/rendezvous/slurm_env.h
// local_task_count, tested in tests/comm/test_slurm_env.cpp) when the launchers' variables are
// unset; 0 when it knows none.
TEST(DefaultThreads, TheSchedulersTaskCountWhenNoLauncherSaid) {
  test_env::ScopedEnv unset("ENGINE_THREADS", nullptr);
  EXPECT_EQ(threads_with({}, 16, 2), 8);
  EXPECT_EQ(threads_with({}, 16, 0), 16);
  EXPECT_EQ(threads_with({}, 3, 4), 1) << "at least 1";
  EXPECT_EQ(threads_with({{"LOCAL_WORLD_SIZE", "4"}}, 16, 8), 4);
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "3"}}, 16, 8), 3);
  // Asked only when needed: a malformed Slurm variable must not fail a torchrun job.
  int asked = 0;
  const EnvLookup env = [](const char* name) -> const char* {
    return std::string(name) == "LOCAL_WORLD_SIZE" ? "2" : nullptr;
  };
  EXPECT_EQ(default_threads(env, 16, [&] { return ++asked, 8; }), 8);
  EXPECT_EQ(asked, 0);
}

TEST(DefaultThreads, BadEngineThreadsIsAnErrorNamingIt) {
  for (const char* bad : {"0", "-2", "abc", "4,2", "100000", "99999999999999999999"}) {
    test_env::ScopedEnv set("ENGINE_THREADS", bad);
    try {
      threads_with({}, 16);
      ADD_FAILURE() << "ENGINE_THREADS=" << bad << " accepted";
    } catch (const engine::Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("ENGINE_THREADS=") + bad +
                                           ": expected an integer 1 .. 1024"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(DefaultThreads, UsableCoresIsAtLeastOne) {
  EXPECT_GE(usable_cores(), 1);
}
