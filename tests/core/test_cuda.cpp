// tests/core/test_cuda.cpp: core's CUDA plumbing (engine::cuda): discovery, the caching allocator,
// copies and the elementwise kernels against the CPU. GPU cases skip when no device answers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda_backend.h"
#include "core/device.h"
#include "core/elementwise.h"
#include "core/error.h"
#ifdef ENGINE_WITH_CUDA
#include "core/cuda/check.cuh"
#endif

namespace engine {
namespace {

// Values unique to position, so an element written to the wrong place shows.
std::vector<float> ramp(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = base + 0.25f * static_cast<float>(i % 1009) - 0.5f * (i % 7);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << "at index " << i;
}

TEST(CudaDiscovery, ReasonIsGivenExactlyWhenNoDeviceAnswers) {
  const int count = cuda_device_count();
  EXPECT_EQ(count, cuda::device_count());
  if (count == 0) {
    const std::string reason = cuda_unavailable_reason();
    EXPECT_EQ(reason.rfind("no CUDA device: ", 0), 0u) << reason;
    EXPECT_GT(reason.size(), std::string("no CUDA device: ").size());
  } else {
    EXPECT_EQ(cuda_unavailable_reason(), "");
  }
}

TEST(CudaDiscovery, CallsWithoutADeviceThrowEngineError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device answers";
  EXPECT_THROW(cuda::alloc(0, 16), Error);
  EXPECT_THROW(cuda::stats(0), Error);
  float host = 0;
  EXPECT_THROW(cuda::copy(&host, Device::cpu(), &host, Device::cuda(0), sizeof host), Error);
  EXPECT_THROW(cuda::fill_f32(0, &host, 1.0f, 1), Error);
}

#ifdef ENGINE_WITH_CUDA
TEST(CudaCheck, NamesFileLineExpressionAndError) {
  try {
    CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "CUDA_CHECK did not throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("test_cuda.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cudaErrorInvalidValue"), std::string::npos) << msg;
    EXPECT_NE(msg.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << msg;
  }
}
#endif

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
  // A device block holding `host`, freed at the end of the test.
  float* upload(const std::vector<float>& host) {
    const size_t nbytes = host.size() * sizeof(float);
    auto* d = static_cast<float*>(cuda::alloc(0, nbytes));
    blocks_.push_back({d, nbytes});
    cuda::copy(d, Device::cuda(0), host.data(), Device::cpu(), nbytes);
    return d;
  }
  std::vector<float> download(const float* d, size_t n) {
    std::vector<float> host(n);
    cuda::copy(host.data(), Device::cpu(), d, Device::cuda(0), n * sizeof(float));
    return host;
  }
  void TearDown() override {
    for (auto [p, nbytes] : blocks_) cuda::free(0, p, nbytes);
  }

 private:
  std::vector<std::pair<void*, size_t>> blocks_;
};

const int64_t kCounts[] = {1, 7, 255, 256, 257, 1013, (1 << 20) + 3, 5'000'000};

TEST_F(CudaTest, RoundTripHostDeviceHost) {
  for (int64_t n : kCounts) {
    const auto host = ramp(n, 1.0f);
    float* d = upload(host);
    EXPECT_EQ(download(d, host.size()), host) << "n = " << n;
  }
}

TEST_F(CudaTest, DeviceToDeviceCopyAtAnOffset) {
  const auto a = ramp(1013, 3.0f);
  float* src = upload(a);
  float* dst = upload(std::vector<float>(1013, 0.0f));
  cuda::copy(dst + 5, Device::cuda(0), src + 3, Device::cuda(0), 1000 * sizeof(float));
  const auto got = download(dst, 1013);
  for (int i = 0; i < 1013; ++i) ASSERT_EQ(got[i], i >= 5 && i < 1005 ? a[i - 2] : 0.0f) << i;
}

TEST_F(CudaTest, FillAxpyScaleMatchTheCpu) {
  for (int64_t n : kCounts) {
    auto x = ramp(n, -2.0f), y = ramp(n, 0.5f);
    float* dx = upload(x);
    float* dy = upload(y);

    cuda::axpy_f32(0, dy, dx, 0.3f, n);
    for (int64_t i = 0; i < n; ++i) y[i] = axpy_op(y[i], x[i], 0.3f);
    expect_close(download(dy, y.size()), y);

    cuda::scale_f32(0, dy, -1.75f, n);
    for (int64_t i = 0; i < n; ++i) y[i] = scale_op(y[i], -1.75f);
    expect_close(download(dy, y.size()), y);

    cuda::fill_f32(0, dx, 42.5f, n - 1);  // the last element must stay untouched
    const auto filled = download(dx, x.size());
    for (int64_t i = 0; i + 1 < n; ++i) ASSERT_EQ(filled[i], 42.5f) << i;
    EXPECT_EQ(filled[n - 1], x[n - 1]);
  }
}

TEST_F(CudaTest, ZeroCountsDoNothing) {
  const std::vector<float> v{1.0f, 2.0f};
  float* d = upload(v);
  cuda::fill_f32(0, d, 9.0f, 0);
  cuda::axpy_f32(0, d, d, 9.0f, 0);
  cuda::scale_f32(0, d, 9.0f, 0);
  cuda::copy(d, Device::cuda(0), nullptr, Device::cpu(), 0);
  EXPECT_EQ(download(d, 2), v);
  EXPECT_THROW(cuda::fill_f32(0, d, 1.0f, -1), Error);
}

TEST_F(CudaTest, AllocatorReusesFreedBlocksOfTheSameClass) {
  cuda::empty_cache(0);
  const AllocatorStats s0 = cuda::stats(0);
  EXPECT_EQ(s0.bytes_cached, 0u);

  void* a = cuda::alloc(0, 1000);  // class 1024
  AllocatorStats s = cuda::stats(0);
  EXPECT_EQ(s.bytes_in_use, s0.bytes_in_use + 1024);
  EXPECT_GE(s.peak_bytes_in_use, s.bytes_in_use);
  cuda::free(0, a, 1000);
  s = cuda::stats(0);
  EXPECT_EQ(s.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s.bytes_cached, 1024u);

  void* b = cuda::alloc(0, 1020);  // same class: the cached block comes back
  EXPECT_EQ(b, a);
  s = cuda::stats(0);
  EXPECT_EQ(s.reuses, s0.reuses + 1);
  EXPECT_EQ(s.allocs, s0.allocs + 2);
  EXPECT_EQ(s.bytes_cached, 0u);

  void* big = cuda::alloc(0, (3 << 20) + 1);  // class 4 MiB
  EXPECT_EQ(cuda::stats(0).bytes_in_use, s0.bytes_in_use + 1024 + (4 << 20));
  cuda::free(0, big, (3 << 20) + 1);
  cuda::free(0, b, 1020);
  s = cuda::stats(0);
  EXPECT_EQ(s.bytes_cached, 1024u + (4 << 20));
  EXPECT_GE(s.peak_bytes_in_use, s0.bytes_in_use + 1024 + (4 << 20));

  cuda::empty_cache(0);
  EXPECT_EQ(cuda::stats(0).bytes_cached, 0u);
  EXPECT_EQ(cuda::stats(0).bytes_in_use, s0.bytes_in_use);
}

TEST_F(CudaTest, MisuseIsReported) {
  int not_ours = 0;
  EXPECT_THROW(cuda::free(0, &not_ours, 4), Error);
  void* p = cuda::alloc(0, 4096);
  EXPECT_THROW(cuda::free(0, p, 1 << 20), Error);  // wrong size
  cuda::free(0, p, 4096);
  EXPECT_THROW(cuda::alloc(cuda::device_count(), 16), Error);
}

}  // namespace
}  // namespace engine
