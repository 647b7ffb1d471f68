// tests/core/test_cuda_binding.cpp: issue 14's findings in core's CUDA plumbing.
//   1. A thread's device is set once, to a device the process uses: DeviceGuard on a thread that
//      never had one keeps its device (restoring the runtime's default would create a context on
//      GPU 0); the home device reaches threads that call enter_home_device(); and a process that
//      works on the last GPU only, from several threads, leaves GPU 0 without a context.
//   5. Host -> device copies whose pageable source is freed or overwritten at once arrive intact
//      (staged through pinned memory), small and large, many in a row.
// The GPU cases skip without a device; the CPU-build behaviour is checked here too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_backend.h"
#include "core/device.h"
#include "core/tensor.h"
#include "tests/common/run.h"
#ifdef ENGINE_WITH_CUDA
#include <cuda.h>

#include "core/cuda/check.cuh"
#endif

namespace engine {
namespace {

TEST(CudaBinding, WithoutCudaNothingIsBoundAndEnteringIsANoOp) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device answers";
  EXPECT_EQ(cuda::home_device(), -1);
  cuda::enter_home_device();  // must not throw, must not touch CUDA
  EXPECT_EQ(cuda::home_device(), -1);
}

#ifdef ENGINE_WITH_CUDA

int current_device() {
  int d = -1;
  CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

TEST(CudaBinding, AGuardOnAFreshThreadKeepsItsDevice) {
  const int n = cuda_device_count();
  if (n == 0) GTEST_SKIP() << cuda_unavailable_reason();
  const int last = n - 1;
  int after = -2, inner_after = -2;
  std::thread([&] {
    { cuda::DeviceGuard g(last); }
    after = current_device();  // not back to the runtime's default, 0
    {
      cuda::DeviceGuard g(0);  // the thread has a device now: a guard restores it
    }
    inner_after = current_device();
  }).join();
  EXPECT_EQ(after, last);
  EXPECT_EQ(inner_after, last);
}

TEST(CudaBinding, EnterHomeDeviceSetsTheHomeDeviceOnAThread) {
  const int n = cuda_device_count();
  if (n == 0) GTEST_SKIP() << cuda_unavailable_reason();
  const int before = cuda::home_device();
  cuda::set_home_device(n - 1);
  int seen = -2;
  std::thread([&] {
    cuda::enter_home_device();
    seen = current_device();
  }).join();
  EXPECT_EQ(seen, n - 1);
  cuda::set_home_device(before < 0 ? 0 : before);
}

// The child half of OnlyTheUsedGpuGetsAContext: works on the last GPU from the main thread and
// from fresh threads (guards, events, pinned memory, copies: what the communicator's worker and
// the NCCL watchdog do), then asks the driver whether GPU 0's primary context is active.
TEST(CudaBinding, ChildWorksOnTheLastGpuOnly) {
  if (!std::getenv("ENGINE_TEST_BINDING_CHILD"))
    GTEST_SKIP() << "run by OnlyTheUsedGpuGetsAContext";
  const int last = cuda_device_count() - 1;
  ASSERT_GE(last, 1);
  cuda::set_home_device(last);
  Tensor t = Tensor::from_vector({1.f, 2.f, 3.f}, {3}, Device::cuda(last));
  std::thread([&] {  // a thread that never set a device, as the NCCL watchdog was
    cuda::Event e = cuda::Event::record(last, cuda::Stream::Comm);
    while (!e.done()) std::this_thread::yield();
    void* p = cuda::alloc_pinned(64, last);
    cuda::free_pinned(p, last);
  })
      .join();
  std::thread([&] {  // the communicator's worker
    cuda::enter_home_device();
    Tensor h = t.to(Device::cpu());
    EXPECT_EQ(h.to_vector(), (std::vector<float>{1.f, 2.f, 3.f}));
  })
      .join();
  using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                             cudaEnableDefault, &q),
            cudaSuccess);
  ASSERT_NE(fn, nullptr);
  unsigned int flags = 0;
  int active = -1;
  ASSERT_EQ(reinterpret_cast<GetState>(fn)(0, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0) << "GPU 0 got a context in a process that only uses cuda:" << last;
}

TEST(CudaBinding, OnlyTheUsedGpuGetsAContext) {
  const int n = cuda_device_count();
  if (n < 2) GTEST_SKIP() << "needs 2 GPUs (" << n << " here): " << cuda_unavailable_reason();
  const testing::RunResult r =
      testing::run("ENGINE_TEST_BINDING_CHILD=1 /proc/" + std::to_string(getpid()) +
                   "/exe --gtest_filter=CudaBinding.ChildWorksOnTheLastGpuOnly");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

TEST(CudaStaging, UploadsFromFreedPageableMemoryArriveIntact) {
  const int n = cuda_device_count();
  if (n == 0) GTEST_SKIP() << cuda_unavailable_reason();
  const Device dev = Device::cuda(0);
  // Many small copies (the ring wraps), then ones larger than the ring (cut into pieces).
  std::vector<Tensor> small;
  for (int i = 0; i < 40000; ++i) {
    auto v = std::make_unique<std::vector<float>>(64, static_cast<float>(i));
    small.push_back(Tensor::from_vector(*v, {64}, dev));
    std::memset(v->data(), 0xff, v->size() * sizeof(float));  // overwritten, then freed
  }
  const int64_t big = (int64_t{24} << 20) / 4 + 3;
  std::vector<Tensor> large;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> v(static_cast<size_t>(big));
    for (int64_t i = 0; i < big; ++i) v[i] = static_cast<float>(i % 65521) + k;
    large.push_back(Tensor::from_vector(v, {big}, dev));
  }
  for (int i = 0; i < 40000; i += 997)
    ASSERT_EQ(small[i].to_vector(), std::vector<float>(64, static_cast<float>(i))) << "copy " << i;
  ASSERT_EQ(small.back().to_vector(), std::vector<float>(64, 39999.f));
  for (int k = 0; k < 3; ++k) {
    const std::vector<float> got = large[k].to_vector();
    for (int64_t i = 0; i < big; i += 4099)
      ASSERT_EQ(got[i], static_cast<float>(i % 65521) + k) << "large " << k << " at " << i;
    ASSERT_EQ(got[big - 1], static_cast<float>((big - 1) % 65521) + k);
  }
}

#endif  // ENGINE_WITH_CUDA

}  // namespace
}  // namespace engine
