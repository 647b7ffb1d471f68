// tests/apps/test_torchrun.cpp: `train` under the real torchrun (Debian's python3-torch 1.13,
// /usr/bin/torchrun) in every rendezvous: static on 1 node x 2 (torchrun's default: its agent
// serves a c10d TCPStore and every rank is a client, comm/rendezvous/torch_store.h), static on 2
// nodes x 1 (two torchrun processes), --standalone and c10d. The 2-rank runs end with the weights
// `launch` gives, bit for bit. A rank that fails writes torchelastic's error file, and torchrun's
// summary names it as the root cause. Torch 1.13's torchrun takes underscore options and, under
// Python 3.11, needs --redirects 1 --tee 1; --monitor_interval 0.2 only makes it notice the end
// sooner than its default 5 s.
#include "tests/apps/train_fixture.h"
#include "tests/common/standalone_lock.h"

using namespace engine;
using namespace engine::testing;

namespace {

const std::string kTorchrun = "/usr/bin/torchrun";
const std::string kTorchrunFlags = " --redirects 1 --tee 1 --monitor_interval 0.2 --no_python ";

class TorchrunTest : public TrainTest {
 protected:
  void SetUp() override {
    if (access(kTorchrun.c_str(), X_OK) != 0)
      GTEST_SKIP() << kTorchrun << " is missing (Debian's python3-torch provides it)";
    TrainTest::SetUp();
  }
  // The train arguments of every run here: 20 steps of the linear model, 2 ranks like one.
  std::string train_args(const std::string& save) const {
    return kTrain +
           " --model linear --dropout 0 --sharding sampler --shuffle off --batch-size 128 "
           "--steps 20 --epochs 5 --timeout 60 --data-dir " +
           data_ + " --save " + path(save);
  }
  // What `launch` gives for the same job: the reference weights.
  void expect_launchs_weights(const std::string& save) {
    RunResult ref = run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                        " -- " + train_args("ref.safetensors") + " --threads 1");
    ASSERT_EQ(ref.code, 0) << ref.output;
    expect_same_bits(path("ref.safetensors"), path(save));
  }
};

}  // namespace

TEST_F(TorchrunTest, StaticOneNodeTwoRanksUsesTheAgentsStore) {
  RunResult r = run(kTorchrun + " --nproc_per_node 2 --master_port " + std::to_string(port()) +
                    kTorchrunFlags + train_args("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  // torchrun sets OMP_NUM_THREADS=1 for its ranks.
  EXPECT_NE(r.output.find("[default0]:World 2: ring over shm, sync bucketed, sharding sampler, "
                          "64 images per rank per step, 1 threads per rank"),
            std::string::npos)
      << r.output;
  expect_launchs_weights("w.safetensors");
}

TEST_F(TorchrunTest, StaticTwoNodesOneRankEach) {
  const std::string node = kTorchrun + " --nnodes 2 --nproc_per_node 1 --master_addr 127.0.0.1 " +
                           "--master_port " + std::to_string(port());
  RunResult r =
      run("(" + node + " --node_rank 1" + kTorchrunFlags + train_args("w1.safetensors") +
          " --threads 1 > " + path("node1.log") + " 2>&1; echo node1=$? >> " + path("node1.log") +
          ") & " + node + " --node_rank 0" + kTorchrunFlags + train_args("w.safetensors") +
          " --threads 1; echo node0=$?; wait; cat " + path("node1.log"));
  EXPECT_NE(r.output.find("node0=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node1=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("World 2"), std::string::npos) << r.output;
  expect_launchs_weights("w.safetensors");
}

TEST_F(TorchrunTest, Standalone) {
  StandaloneLock lock;  // --standalone always serves its rendezvous on localhost:29400
  RunResult r = run(kTorchrun + " --standalone --nproc_per_node 2" + kTorchrunFlags +
                    train_args("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  expect_launchs_weights("w.safetensors");
}

TEST_F(TorchrunTest, C10dRendezvous) {
  RunResult r = run(kTorchrun + " --nnodes 1 --nproc_per_node 2 --rdzv_backend c10d " +
                    "--rdzv_endpoint 127.0.0.1:" + std::to_string(port()) + kTorchrunFlags +
                    train_args("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  expect_launchs_weights("w.safetensors");
}

TEST_F(TorchrunTest, TheSummaryNamesTheRankThatFailedFirst) {
  // Rank 1 fails after the rendezvous (a --data-dir without the data, read once the ranks have
  // met and agreed on their settings, where --data-dir may differ); rank 0 then fails too,
  // waiting for it in the data's agreement, a moment later.
  const std::string train = kTrain + " --model linear --steps 20 --timeout 60";
  const std::string script = "if [ \"$RANK\" = 1 ]; then exec " + train + " --data-dir " +
                             path("missing") + "; else exec " + train + " --data-dir " + data_ +
                             "; fi";
  RunResult r = run(kTorchrun + " --nproc_per_node 2 --master_port " + std::to_string(port()) +
                    kTorchrunFlags + "/bin/sh -c '" + script + "'");
  EXPECT_NE(r.code, 0) << r.output;
  const size_t root = r.output.find("Root Cause (first observed failure):");
  ASSERT_NE(root, std::string::npos) << r.output;
  const std::string cause = r.output.substr(root);
  EXPECT_NE(cause.find("rank      : 1 (local_rank: 1)"), std::string::npos) << r.output;
  EXPECT_NE(cause.find("traceback : train: "), std::string::npos) << r.output;
  EXPECT_NE(cause.find(path("missing") + ": missing MNIST file"), std::string::npos) << r.output;
  EXPECT_EQ(cause.find("error_file: <N/A>"), std::string::npos) << r.output;
}
