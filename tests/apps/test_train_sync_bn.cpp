// tests/apps/test_train_sync_bn.cpp: `train --sync-bn`: two ranks normalise with the statistics
// of the global batch, so they end where one rank with the same global batch ends, weights and
// running buffers; without it they do not. On a model without batch norm it changes nothing.
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

const std::string kConvnet =
    " --model convnet --dropout 0 --sharding sampler --shuffle off "
    "--batch-size 64 --steps 4 --epochs 2 --threads 1 --timeout 60";

// "Test set: average loss L, ..." of rank 0: every rank's running buffers were used on its slice.
std::string test_line(const std::string& out) {
  const size_t at = out.rfind("Test set:");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

class SyncBnTest : public TrainTest {
 protected:
  RunResult two(const std::string& args) {
    return run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- " +
               kTrain + args);
  }
};

}  // namespace

TEST_F(SyncBnTest, TwoRanksEndWhereOneRankWithTheGlobalBatchEnds) {
  const std::string args = kConvnet + " --data-dir " + data_;
  RunResult one = run(kTrain + args + " --save " + path("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult sync = two(args + " --sync-bn --save " + path("sync.safetensors"));
  ASSERT_EQ(sync.code, 0) << sync.output;
  // Weights, running_mean and running_var.
  EXPECT_LT(max_rel_diff(path("one.safetensors"), path("sync.safetensors")), 1e-5);
  // Rank 1 evaluated its half with its own running buffers: the same test loss as one rank.
  EXPECT_EQ(test_line(one.output), test_line(sync.output)) << one.output << sync.output;
  // Per-rank statistics (rank 0's buffers broadcast) end elsewhere: the test can fail.
  RunResult local = two(args + " --save " + path("local.safetensors"));
  ASSERT_EQ(local.code, 0) << local.output;
  EXPECT_GT(max_rel_diff(path("one.safetensors"), path("local.safetensors")), 1e-3);
}

TEST_F(SyncBnTest, OnAModelWithoutBatchNormItChangesNothing) {
  const std::string args = " --model linear --steps 3 --timeout 60 --data-dir " + data_;
  RunResult a = two(args + " --save " + path("a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = two(args + " --sync-bn --save " + path("b.safetensors"));
  ASSERT_EQ(b.code, 0) << b.output;
  expect_same_bits(path("a.safetensors"), path("b.safetensors"));
}
