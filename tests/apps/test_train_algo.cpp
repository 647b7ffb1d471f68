// tests/apps/test_train_algo.cpp: `train --algo`: two ranks under `launch` train like one with
// every all_reduce algorithm (the gradients' all_reduce and the start's broadcast run on it), and
// --algo with a backend of its own is a usage error.
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

class TrainAlgo : public TrainTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(TrainAlgo, TwoRanksTrainLikeOne) {
  const std::string args =
      " --model linear --dropout 0 --sharding sampler --shuffle off "
      "--batch-size 128 --steps 10 --epochs 5 --data-dir " +
      data_;
  RunResult one = run(kTrain + args + " --threads 2 --save " + path("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult two = run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                      " -- " + kTrain + args + " --algo " + GetParam() + " --timeout 60 --save " +
                      path("two.safetensors"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_LT(max_rel_diff(path("one.safetensors"), path("two.safetensors")), 2e-4);
}

INSTANTIATE_TEST_SUITE_P(Algos, TrainAlgo, ::testing::Values("ring", "rd", "rh", "tree"));

TEST_F(TrainTest, AlgoWithAnotherBackendIsAUsageError) {
  RunResult r = run(kTrain + " --algo rd --backend mpi --steps 1");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("--algo"), std::string::npos) << r.output;
}
