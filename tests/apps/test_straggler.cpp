// tests/apps/test_straggler.cpp: the straggler named while training runs (issue 36). Three ranks
// of simplecnn, one of them given a quarter of a core (pinned with taskset beside three busy
// loops) while the others share the other core: rank 0 names it, and the epoch's --metrics row
// says so. An even run names nobody. Both run alone (tests/serial_tests.cmake).
#include <sched.h>
#include <signal.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "io/json.h"
#include "tests/apps/job_control.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

class StragglerTest : public TrainTest {
 protected:
  void SetUp() override {
    TrainTest::SetUp();
    data66_ = (dir_ / "data66").string();
    write_dataset(data66_, 96 * 66, 200);  // 66 steps an epoch at batch 96
  }
  // `world` ranks by hand over `transport`, 2 epochs; cores[r]: the core rank r runs on ("" any).
  std::vector<std::unique_ptr<Job>> start(int world, const std::string& transport,
                                          const std::vector<std::string>& cores) {
    std::vector<std::unique_ptr<Job>> ranks;
    const int p = port();
    for (int r = 0; r < world; ++r) {
      const std::string pin = cores.empty() ? "" : "/usr/bin/taskset -c " + cores[r] + " ";
      ranks.push_back(std::make_unique<Job>(words(
          pin + kTrain + " --model simplecnn --epochs 2 --batch-size 96 --threads 1 --data-dir " +
          data66_ + " --transport " + transport + " --metrics " + path("m.jsonl") +
          " --init-method tcp://127.0.0.1:" + std::to_string(p) + " --world-size " +
          std::to_string(world) + " --rank " + std::to_string(r))));
    }
    return ranks;
  }
  std::vector<Json> rows() const {
    std::ifstream in(path("m.jsonl"));
    std::vector<Json> out;
    for (std::string line; std::getline(in, line);) out.push_back(parse_json(line, "m.jsonl"));
    return out;
  }
  static bool two_cores() {
    cpu_set_t s;
    return sched_getaffinity(0, sizeof s, &s) == 0 && CPU_ISSET(0, &s) && CPU_ISSET(1, &s);
  }
  std::string data66_;
};

TEST_F(StragglerTest, ARankWithAQuarterOfACoreIsNamed) {
  if (!two_cores()) GTEST_SKIP() << "needs cores 0 and 1";
  std::vector<std::unique_ptr<Job>> busy;
  for (int i = 0; i < 3; ++i)
    busy.push_back(std::make_unique<Job>(std::vector<std::string>{
        "/usr/bin/taskset", "-c", "1", "/bin/sh", "-c", "while :; do :; done"}));
  auto ranks = start(3, "shm", {"0", "1", "0"});
  for (int r = 2; r >= 0; --r) ASSERT_EQ(ranks[r]->finish(120), 0) << ranks[r]->output();
  for (auto& b : busy) ::kill(b->pid(), SIGKILL);
  const std::string out = ranks[0]->output();
  EXPECT_NE(out.find("rank 1 is the straggler: last into "), std::string::npos) << out;
  const std::vector<Json> m = rows();
  ASSERT_EQ(m.size(), 2u);
  for (const Json& row : m) {
    EXPECT_EQ(row["straggler_rank"], 1) << row;
    EXPECT_GE(row["straggler_share"].get<double>(), 0.8) << row;
    EXPECT_GT(row["straggler_late_ms"].get<double>(), 0) << row;
    ASSERT_EQ(row["wait_ms_per_step"].size(), 3u) << row;
    EXPECT_LT(row["wait_ms_per_step"][1].get<double>(), row["wait_ms_per_step"][0].get<double>());
  }
}

TEST_F(StragglerTest, AnEvenRunNamesNobody) {
  auto ranks = start(2, "tcp", {});
  for (int r = 1; r >= 0; --r) ASSERT_EQ(ranks[r]->finish(120), 0) << ranks[r]->output();
  EXPECT_EQ(ranks[0]->output().find("is the straggler"), std::string::npos) << ranks[0]->output();
  for (const Json& row : rows()) {
    EXPECT_TRUE(row["straggler_rank"].is_null()) << row;
    EXPECT_EQ(row["wait_ms_per_step"].size(), 2u) << row;
  }
}

}  // namespace
