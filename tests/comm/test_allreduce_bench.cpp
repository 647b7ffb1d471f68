// tests/comm/test_allreduce_bench.cpp: the allreduce_bench program over the real transports, as
// processes: every collective checked (values unique to rank and position) with no wrong element,
// one JSON object per row with nccl-tests' keys. Skipped when the program is not built.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

const std::string kBench = std::string(ENGINE_BUILD_DIR) + "/apps/allreduce_bench";

struct BenchRun {
  int code = -1;
  std::string out;
  std::vector<std::string> json;
};

BenchRun run_bench(const std::string& args, const std::string& tag) {
  BenchRun r;
  const std::string json = ::testing::TempDir() + "allreduce_bench_" + tag + ".jsonl";
  const std::string cmd = kBench + " " + args + " --json " + json + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) r.out += buf;
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  std::ifstream f(json);
  for (std::string line; std::getline(f, line);) r.json.push_back(line);
  std::remove(json.c_str());
  return r;
}

class AllreduceBench : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(AllreduceBench, EveryCollectiveChecksClean) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  const auto [transport, world] = GetParam();
  const std::string tag = std::string(transport) + std::to_string(world);
  BenchRun r = run_bench("--world-size " + std::to_string(world) + " --transport " + transport +
                             " --collective all --min-bytes 4 --max-bytes 256K --step-factor 8" +
                             " --iters 3 --warmup 1 --timeout 60",
                         tag);
  ASSERT_EQ(r.code, 0) << r.out;
  // Sizes 4, 32, ..., 128K (counts 1 .. 32768, 0 for all_gather and reduce_scatter at W=3):
  // 6 rows per collective, 5 collectives.
  ASSERT_EQ(r.json.size(), 30u) << r.out;
  for (const auto& line : r.json) {
    for (const char* key : {"\"bytes\": ", "\"count\": ", "\"time_us\": ", "\"algbw_gbs\": ",
                            "\"busbw_gbs\": ", "\"wrong\": "})
      EXPECT_NE(line.find(key), std::string::npos) << key << " missing in " << line;
    EXPECT_NE(line.find("\"wrong\": 0}"), std::string::npos) << line;
    const std::string kind = world == 1 ? "self" : transport;  // one rank talks to nobody
    EXPECT_NE(line.find("\"transport\": \"" + kind + "\""), std::string::npos) << line;
  }
  for (const char* table :
       {"# all_reduce,", "# broadcast,", "# reduce,", "# all_gather,", "# reduce_scatter,"})
    EXPECT_NE(r.out.find(table), std::string::npos) << table << " table missing:\n" << r.out;
}

INSTANTIATE_TEST_SUITE_P(Transports, AllreduceBench,
                         ::testing::Values(std::make_pair("tcp", 2), std::make_pair("shm", 3),
                                           std::make_pair("shm", 1)),
                         [](const auto& p) {
                           return std::string(p.param.first) + "_W" +
                                  std::to_string(p.param.second);
                         });

TEST(AllreduceBenchFlags, BadFlagsFailWithAMessage) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  BenchRun r = run_bench("--world-size 2 --collective all_to_all", "bad");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("all_to_all"), std::string::npos) << r.out;
}

}  // namespace
