// tests/apps/test_train_algo.cpp: `ENGINE_ALGO=... train`: two ranks under `launch` train like one
// with every all_reduce algorithm (the gradients' all_reduce and the start's broadcast run on it),
// ENGINE_ALGO with a backend of its own is a usage error, and ranks that disagree on it refuse.
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
  RunResult two = run("ENGINE_ALGO=" + GetParam() + " " + kLaunchBin +
                      " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- " +
                      kTrain + args + " --timeout 60 --save " + path("two.safetensors"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_LT(max_rel_diff(path("one.safetensors"), path("two.safetensors")), 2e-4);
}

INSTANTIATE_TEST_SUITE_P(Algos, TrainAlgo, ::testing::Values("ring", "rd", "rh", "tree"));

TEST_F(TrainTest, AlgoWithAnotherBackendIsAUsageError) {
  RunResult r = run("ENGINE_ALGO=rd " + kTrain + " --backend mpi --steps 1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("ENGINE_ALGO=rd picks among our host algorithms"), std::string::npos)
      << r.output;
}

// The variables that change the collectives are compared like flags: rank 1 with another
// ENGINE_ALGO stops both ranks with one line naming it.
TEST_F(TrainTest, RanksThatDisagreeOnEngineAlgoRefuse) {
  RunResult r = run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                    " -- sh -c 'ENGINE_ALGO=$([ $RANK = 0 ] && echo ring || echo rd) exec " +
                    kTrain + " --model linear --steps 1 --timeout 60 --data-dir " + data_ + "'");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ranks disagree on ENGINE_ALGO: ring on rank 0, rd on rank 1"),
            std::string::npos)
      << r.output;
}
