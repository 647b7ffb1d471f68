// tests/apps/test_train_cuda_graph.cpp: train's --cuda-graph and --data-on-device on a machine
// without a GPU: auto (the default) is silent there, on exits 2 naming the flag and the reason. The
// policies themselves (warm-up, capture, replays, each reason; the data's choice and gather) are
// tested in tests/nn/test_step_graph.cpp and tests/data/test_device_data.cpp.
#include <gtest/gtest.h>

#include <string>

#include "tests/apps/train_fixture.h"

namespace engine::testing {
namespace {

class TrainCudaGraph : public TrainTest {
 protected:
  RunResult train(const std::string& extra) const {
    return run(kTrain + " --model linear --steps 2 --batch-size 32 --device cpu --data-dir " +
               data_ + " " + extra);
  }
};

// auto is the default; on the CPU there is nothing to capture or upload, and nothing to say.
TEST_F(TrainCudaGraph, AutoByDefaultIsSilentOnTheCpu) {
  for (const char* flags : {"", "--cuda-graph auto --data-on-device auto"}) {
    const RunResult r = train(flags);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(r.output.find("CUDA graph"), std::string::npos) << flags << r.output;
    EXPECT_EQ(r.output.find("Data on device"), std::string::npos) << flags << r.output;
  }
}

TEST_F(TrainCudaGraph, DataOnDeviceOnTheCpuExitsTwoNamingTheFlag) {
  RunResult r = train("--data-on-device on");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--data-on-device on"), std::string::npos) << r.output;
  r = run(kTrain + " --model linear --steps 2 --batch-size 32 --data-dir " + data_ +
          " --data-on-device on");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--data-on-device on: the device is the CPU"), std::string::npos)
      << r.output;
}

TEST_F(TrainCudaGraph, OnWhereTheStepCannotBeCapturedExitsTwoNamingTheFlag) {
  RunResult r = train("--cuda-graph on");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--cuda-graph on"), std::string::npos) << r.output;
  // --device auto on a machine without a GPU: the device is the CPU, found at run time.
  r = run(kTrain + " --model linear --steps 2 --batch-size 32 --data-dir " + data_ +
          " --cuda-graph on");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--cuda-graph on: the step cannot be captured: the device is the CPU"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace engine::testing
