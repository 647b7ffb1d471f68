// tests/apps/test_threads.cpp: the default thread count of a rank (apps/threads.h).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "apps/threads.h"
#include "io/error.h"

using namespace engine::apps;

namespace {

int threads_with(const std::map<std::string, std::string>& vars, int cores) {
  return default_threads(
      [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      cores);
}

}  // namespace

TEST(DefaultThreads, EngineThreadsThenOmpNumThreadsWin) {
  EXPECT_EQ(threads_with({{"ENGINE_THREADS", "3"}, {"OMP_NUM_THREADS", "1"}}, 16), 3);
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "1"}, {"LOCAL_WORLD_SIZE", "2"}}, 16), 1);
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "4,2"}}, 16), 4);
  // OMP_NUM_THREADS is shared with other software: a value that is not a positive integer is
  // skipped, as libgomp does; an empty ENGINE_THREADS is unset.
  EXPECT_EQ(threads_with({{"ENGINE_THREADS", ""}, {"OMP_NUM_THREADS", "x"}}, 16), 16);
  EXPECT_EQ(threads_with({{"OMP_NUM_THREADS", "-2"}}, 16), 16);
}

TEST(DefaultThreads, CoresSharedByTheRanksOfThisHost) {
  EXPECT_EQ(threads_with({}, 16), 16);
  EXPECT_EQ(threads_with({{"LOCAL_WORLD_SIZE", "4"}}, 16), 4);
  EXPECT_EQ(threads_with({{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}, 16), 5);
  EXPECT_EQ(threads_with({{"LOCAL_WORLD_SIZE", "8"}}, 2), 1) << "at least 1";
  EXPECT_EQ(threads_with({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),8"}, {"SLURM_NODEID", "3"}}, 16), 2);
  EXPECT_EQ(threads_with({{"SLURM_TASKS_PER_NODE", "2(x3),8"}, {"SLURM_NODEID", "1"}}, 16), 8);
  EXPECT_EQ(threads_with({{"SLURM_TASKS_PER_NODE", "4"}}, 16), 4) << "SLURM_NODEID unset: node 0";
}

TEST(DefaultThreads, BadEngineThreadsIsAnErrorNamingIt) {
  for (const char* bad : {"0", "-2", "abc", "4,2", "100000", "99999999999999999999"}) {
    try {
      threads_with({{"ENGINE_THREADS", bad}}, 16);
      ADD_FAILURE() << "ENGINE_THREADS=" << bad << " accepted";
    } catch (const engine::Error& e) {
      EXPECT_NE(std::string(e.what()).find("ENGINE_THREADS='"), std::string::npos) << e.what();
    }
  }
}

TEST(DefaultThreads, UsableCoresIsAtLeastOne) {
  EXPECT_GE(usable_cores(), 1);
}
