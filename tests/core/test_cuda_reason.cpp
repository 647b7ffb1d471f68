// tests/core/test_cuda_reason.cpp: the "no CUDA device" line (core/device.h cuda_absence_reason):
// on a machine with no NVIDIA driver at all it says so, instead of the runtime's "CUDA driver
// version is insufficient for CUDA runtime version" (issue 14).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"

namespace engine {
namespace {

const char kInsufficient[] = "CUDA driver version is insufficient for CUDA runtime version";

TEST(CudaAbsenceReason, NoDriverLibraryMeansNoDriver) {
  EXPECT_EQ(cuda_absence_reason(kInsufficient, true, false, 0, 13000),
            "no CUDA device: no NVIDIA driver is installed (libcuda.so.1 does not load)");
}

TEST(CudaAbsenceReason, AnOldDriverGivesBothVersions) {
  EXPECT_EQ(cuda_absence_reason(kInsufficient, true, true, 12040, 13000),
            std::string("no CUDA device: the NVIDIA driver supports CUDA up to 12.4, this build "
                        "needs CUDA 13.0 (") +
                kInsufficient + ")");
}

TEST(CudaAbsenceReason, OtherErrorsKeepTheRuntimesText) {
  EXPECT_EQ(cuda_absence_reason("no CUDA-capable device is detected", false, true, 13000, 13000),
            "no CUDA device: no CUDA-capable device is detected");
  EXPECT_EQ(cuda_absence_reason(kInsufficient, true, true, 0, 13000),
            std::string("no CUDA device: ") + kInsufficient);
}

// What this process says, where it has CUDA built in but no driver (our machines).
TEST(CudaAbsenceReason, ThisMachineWithoutADriverSaysSo) {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY);
  if (h) {
    dlclose(h);
    GTEST_SKIP() << "an NVIDIA driver is installed here";
  }
  const std::string why = cuda_unavailable_reason();
#ifdef ENGINE_WITH_CUDA
  EXPECT_EQ(why, "no CUDA device: no NVIDIA driver is installed (libcuda.so.1 does not load)");
#else
  EXPECT_EQ(why.rfind("no CUDA device: this build has no CUDA support", 0), 0u) << why;
#endif
}

}  // namespace
}  // namespace engine
