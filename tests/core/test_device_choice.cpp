// tests/core/test_device_choice.cpp: which device a rank of train picks (core/device_choice.h),
// issue 14 finding 7: a rank that sees exactly one GPU (CUDA_VISIBLE_DEVICES per rank, Slurm
// --gpus-per-task=1) uses it whatever its local rank.
#include <gtest/gtest.h>

#include "core/device_choice.h"
#include "tests/common/expect_error.h"

namespace engine {
namespace {

const char kNoDriver[] = "no CUDA device: no NVIDIA driver is installed";

TEST(PickDevice, CpuIsCpuWhateverIsVisible) {
  for (int visible : {0, 1, 8}) {
    const DeviceChoice d = pick_device("cpu", visible, "", 3, 4, 3);
    EXPECT_EQ(d.device, Device::cpu());
    EXPECT_EQ(d.notice, "");
  }
}

TEST(PickDevice, NoDeviceAutoFallsBackWithANoticeCudaFails) {
  const DeviceChoice d = pick_device("auto", 0, kNoDriver, 1, 2, 1);
  EXPECT_EQ(d.device, Device::cpu());
  EXPECT_EQ(d.notice, std::string(kNoDriver) + ": training on cpu");
  testing::expect_error([] { pick_device("cuda", 0, kNoDriver, 0, 1, 0); },
                        {"--device cuda: no CUDA device: no NVIDIA driver is installed"});
}

TEST(PickDevice, EveryRankSeesEveryGpuOfTheHost) {
  for (const char* mode : {"auto", "cuda"})
    for (int lr = 0; lr < 8; ++lr)
      EXPECT_EQ(pick_device(mode, 8, "", lr, 8, 8 + lr).device, Device::cuda(lr));
}

TEST(PickDevice, OneGpuPerTaskUsesItForEveryLocalRank) {
  for (const char* mode : {"auto", "cuda"})
    for (int lr = 0; lr < 4; ++lr) {
      const DeviceChoice d = pick_device(mode, 1, "", lr, 4, lr);
      EXPECT_EQ(d.device, Device::cuda(0)) << mode << " local rank " << lr;
      EXPECT_EQ(d.notice, "");
    }
}

TEST(PickDevice, FewerGpusThanLocalRanksIsAnErrorNamingTheRank) {
  EXPECT_EQ(pick_device("auto", 2, "", 1, 4, 5).device, Device::cuda(1));
  testing::expect_error(
      [] { pick_device("auto", 2, "", 2, 4, 6); },
      {"rank 6 is local rank 2 of 4 on this host but sees 2 CUDA devices", "CUDA_VISIBLE_DEVICES"});
}

}  // namespace
}  // namespace engine
