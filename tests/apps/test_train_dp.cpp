// tests/apps/test_train_dp.cpp: `train --mode dp` (one process driving several devices, the
// tutorials' nn.DataParallel) on CPU replicas, and the errors of the CUDA collective flags.
#include <algorithm>
#include <cmath>

#include "core/device.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

// Without batch norm and dropout, DataParallel's replicas compute exactly the whole batch's
// gradient: the run tracks the plain one.
TEST_F(TrainTest, DataParallelOnCpuReplicasTracksThePlainRun) {
  for (const char* model : {"linear", "simplecnn"}) {
    const std::string args = std::string(" --model ") + model +
                             " --dropout 0 --threads 2 --steps 6 --device cpu --data-dir " + data_;
    RunResult one = run(kTrain + args + " --save " + path("one.safetensors"));
    ASSERT_EQ(one.code, 0) << one.output;
    RunResult dp =
        run(kTrain + args + " --mode dp --dp-devices cpu,cpu,cpu --save " + path("dp.safetensors"));
    ASSERT_EQ(dp.code, 0) << dp.output;
    EXPECT_NE(dp.output.find("DataParallel over 3 devices: cpu cpu cpu"), std::string::npos)
        << dp.output;
    EXPECT_LT(max_abs_diff(path("one.safetensors"), path("dp.safetensors")), 2e-5) << model;
  }
}

TEST_F(TrainTest, DataParallelAndCudaCollectiveFlagsGiveClearErrors) {
  const std::string base = kTrain + " --model linear --steps 1 --data-dir " + data_;
  RunResult r = run(base + " --device cpu --mode dp");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--dp-devices"), std::string::npos) << r.output;
  r = run(base + " --dp-devices cpu,cpu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--mode dp only"), std::string::npos) << r.output;
  r = run(base + " --mode dp --dp-devices cpu,,cpu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("empty item"), std::string::npos) << r.output;
  r = run(base + " --mode dp --dp-devices cpu,gpu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("gpu"), std::string::npos) << r.output;
  r = run(base + " --device cpu --backend nccl");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--backend ring"), std::string::npos) << r.output;
  r = run("ENGINE_CUDA_RING=staged " + base + " --backend nccl");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--backend nccl does not use it"), std::string::npos) << r.output;
  r = run("ENGINE_CUDA_RING=ipc " + base + " --device cpu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("ENGINE_CUDA_RING=ipc applies to GPUs"), std::string::npos) << r.output;
  r = run("ENGINE_CUDA_RING=staged ENGINE_RING_PROTOCOL=ll " + base);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("ENGINE_RING_PROTOCOL=ll chooses"), std::string::npos) << r.output;
  r = run("ENGINE_CUDA_RING=staged ENGINE_RING_CHANNELS=16 " + base);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("ENGINE_RING_CHANNELS=16 sets"), std::string::npos) << r.output;
  r = run("ENGINE_CUDA_RING=ipc ENGINE_RING_CHANNELS=33 " + base);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("ENGINE_RING_CHANNELS=33: expected an integer 0 .. 32"),
            std::string::npos)
      << r.output;
  if (cuda_device_count() == 0) {
    r = run(base + " --mode dp");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.output.find("no CUDA device"), std::string::npos) << r.output;
    r = run(base + " --mode dp --dp-devices cuda:0,cuda:1");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.output.find("cuda:0 is not a device"), std::string::npos) << r.output;
  }
}

// Two ranks of launch with --mode dp: one process per job only.
TEST_F(TrainTest, DataParallelRefusesToBeOneOfSeveralRanks) {
  RunResult r = run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                    " -- " + kTrain + " --model linear --steps 1 --mode dp --dp-devices cpu,cpu " +
                    "--timeout 30 --data-dir " + data_);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--mode dp is one process"), std::string::npos) << r.output;
}

// On GPUs: two ranks train like one over each CUDA path (skips without two devices... or one:
// ranks may share cuda:0 only for staged and NCCL-free paths, so this needs two).
TEST_F(TrainTest, TwoGpuRanksTrainLikeOneOverEveryCudaPath) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << (cuda_device_count() == 0 ? cuda_unavailable_reason()
                                              : "needs 2 CUDA devices, found 1");
  const std::string args =
      " --model simplecnn --dropout 0 --sharding sampler --shuffle off --steps 10 --device cuda "
      "--data-dir " +
      data_;
  RunResult one = run(kTrain + args + " --save " + path("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.output;
  for (const char* path_args : {"ENGINE_CUDA_RING=auto --backend nccl", "ENGINE_CUDA_RING=staged",
                                "ENGINE_CUDA_RING=ipc"}) {
    const std::string s = path_args, env = s.substr(0, s.find(' ')),
                      flags = s.find(' ') == std::string::npos ? "" : s.substr(s.find(' '));
    RunResult two =
        run(env + " " + kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
            " -- " + kTrain + args + flags + " --timeout 60 --save " + path("two.safetensors"));
    ASSERT_EQ(two.code, 0) << path_args << "\n" << two.output;
    EXPECT_LT(max_abs_diff(path("one.safetensors"), path("two.safetensors")), 1e-4) << path_args;
  }
}

// Dropout on: the replicas' own dropout streams travel in the checkpoint, so a resumed --mode dp
// run ends with the same bits as an uninterrupted one.
TEST_F(TrainTest, DataParallelResumeEqualsAnUninterruptedRunBitForBit) {
  const std::string common = kTrain +
                             " --model simplecnn --threads 2 --epochs 2 --batch-size 64 --device "
                             "cpu --mode dp --dp-devices cpu,cpu --data-dir " +
                             data_;
  expect_resume_bit_for_bit(common, dir_);
}
