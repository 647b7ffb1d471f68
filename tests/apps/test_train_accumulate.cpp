// tests/apps/test_train_accumulate.cpp: `train --accumulate K`: K batches of B end where one batch
// of K x B ends, on one rank and on two; the first K-1 batches of a group run no collective.
#include <map>
#include <sstream>

#include "io/atomic_file.h"
#include "io/json.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

// Without batch norm or dropout, in sampler order: the runs differ only in how sums associate.
const std::string kSame =
    " --model simplecnn --dropout 0 --sharding sampler --shuffle off "
    "--steps 6 --epochs 3 --threads 1 --timeout 60";

}  // namespace

TEST_F(TrainTest, AccumulateFourBatchesOf32EndsWhereBatch128Ends) {
  const std::string args = kSame + " --data-dir " + data_;
  RunResult big = run(kTrain + args + " --batch-size 128 --save " + path("big.safetensors"));
  ASSERT_EQ(big.code, 0) << big.output;
  RunResult acc =
      run(kTrain + args + " --batch-size 32 --accumulate 4 --save " + path("acc.safetensors"));
  ASSERT_EQ(acc.code, 0) << acc.output;
  EXPECT_LT(max_rel_diff(path("big.safetensors"), path("acc.safetensors")), 2e-4);
  // Unaccumulated batches of 32 take 4x the steps: a test that could not fail would pass here.
  RunResult small = run(kTrain + args + " --batch-size 32 --save " + path("small.safetensors"));
  ASSERT_EQ(small.code, 0) << small.output;
  EXPECT_GT(max_rel_diff(path("big.safetensors"), path("small.safetensors")), 1e-2);
}

TEST_F(TrainTest, AccumulateOnTwoRanksEndsWhereOneBigBatchEnds) {
  const std::string args = kSame + " --data-dir " + data_;
  RunResult big = run(kTrain + args + " --batch-size 128 --save " + path("big.safetensors"));
  ASSERT_EQ(big.code, 0) << big.output;
  RunResult two =
      run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- " +
          kTrain + args + " --batch-size 32 --accumulate 4 --save " + path("two.safetensors"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_LT(max_rel_diff(path("big.safetensors"), path("two.safetensors")), 2e-4);
}

TEST_F(TrainTest, AccumulateRunsTheCollectivesOnTheLastBatchOfAGroupOnly) {
  // linear in two buckets (10 KB cap): 2 all_reduces per optimizer step, 3 steps of 3 batches.
  RunResult r = run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                    " -- " + kTrain +
                    " --model linear --batch-size 32 --steps 3 --accumulate 3 --bucket-mb 0.01 "
                    "--timeout 60 " +
                    "--data-dir " + data_ + " --trace " + path("t.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  Json doc = parse_json(read_file(path("t.json")), path("t.json"));
  std::map<int64_t, int> allreduces, steps, optimizer;
  for (const Json& e : doc.at("traceEvents")) {
    if (e.at("ph").get<std::string>() != "X") continue;
    const int64_t pid = e.at("pid").get<int64_t>();
    const std::string name = e.at("name").get<std::string>();
    allreduces[pid] += name == "allreduce";
    steps[pid] += name == "step";
    optimizer[pid] += name == "optimizer";
  }
  EXPECT_EQ(steps, (std::map<int64_t, int>{{0, 9}, {1, 9}}));
  EXPECT_EQ(optimizer, (std::map<int64_t, int>{{0, 3}, {1, 3}}));
  EXPECT_EQ(allreduces, (std::map<int64_t, int>{{0, 6}, {1, 6}}));
}

TEST_F(TrainTest, AccumulateStepsTheEpochsLastShortGroup) {
  // 512 images in batches of 128: 4 batches per epoch, groups of 3 and 1: two steps per epoch.
  RunResult r = run(kTrain + " --model linear --accumulate 3 --epochs 2 --data-dir " + data_ +
                    " --metrics " + path("m.jsonl"));
  ASSERT_EQ(r.code, 0) << r.output;
  std::istringstream lines(read_file(path("m.jsonl")));
  std::vector<int64_t> steps;
  for (std::string line; std::getline(lines, line);)
    steps.push_back(parse_json(line, "m.jsonl").at("step").get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 4}));
}

TEST_F(TrainTest, AccumulateBelowOneIsAUsageErrorNamingTheFlag) {
  RunResult r = run(kTrain + " --accumulate 0 --data-dir " + data_);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--accumulate must be at least 1, got 0"), std::string::npos) << r.output;
}
