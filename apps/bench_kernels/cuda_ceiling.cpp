// apps/bench_kernels/cuda_ceiling.cpp: the device's ceilings, timed between cudaEvents on its
// compute stream: cuBLAS SGEMM at n = 1024, 2048, 4096 on the engine's own handle (so in the math
// mode the linear kernels use), and cudaMemcpyAsync device to device over 256 MiB arrays (beyond
// any L2). Each is the best of several batches of calls after an untimed call.
#include "apps/bench_kernels/cuda_ceiling.h"

#include <cstdio>

#include "core/error.h"

#ifdef ENGINE_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <functional>

#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/handles.cuh"
#include "kernels/testing/ops_cuda.h"
#endif

namespace engine::bench {

#ifdef ENGINE_WITH_CUDA
namespace {

using kernels::testing::DeviceBuffer;
using kernels::testing::uniform;

// Two timing events on the compute stream of one device (current while this lives).
class EventTimer {
 public:
  explicit EventTimer(int device) : guard_(device), stream_(cuda::compute_stream(device)) {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Seconds per call of fn (which queues work on the compute stream): `reps` calls between two
  // events, the best of `trials` batches, after one untimed call.
  double best_seconds(int trials, int reps, const std::function<void()>& fn) {
    fn();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    double best = 1e30;
    for (int t = 0; t < trials; ++t) {
      CUDA_CHECK(cudaEventRecord(start_, stream_));
      for (int r = 0; r < reps; ++r) fn();
      CUDA_CHECK(cudaEventRecord(stop_, stream_));
      CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0.f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      best = std::min(best, double(ms) * 1e-3 / reps);
    }
    return best;
  }
  cudaStream_t stream() const { return stream_; }

 private:
  cuda::DeviceGuard guard_;
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The handle's math mode, or an engine::Error when it may use TF32 (or any tensor-op shortcut).
std::string fp32_math_mode(cublasHandle_t h) {
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  CUBLAS_CHECK(cublasGetMathMode(h, &mode));
  const int base = static_cast<int>(mode) & 0xf;  // without the reduction flag (16)
  std::string name;
  if (base == CUBLAS_DEFAULT_MATH)
    name = "CUBLAS_DEFAULT_MATH";
  else if (base == CUBLAS_PEDANTIC_MATH)
    name = "CUBLAS_PEDANTIC_MATH";
  ENGINE_CHECK(!name.empty(), "bench_kernels: the engine's cuBLAS handle is in math mode ",
               static_cast<int>(mode),
               ", not FP32 (CUBLAS_DEFAULT_MATH or CUBLAS_PEDANTIC_MATH): TF32 tensor ops would "
               "round the GEMMs to 10-bit mantissas and fail the FP32 checks");
  if (static_cast<int>(mode) & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
    name += " | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION";
  return name;
}

std::string device_name(int device) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  char b[512];
  std::snprintf(b, sizeof b, "cuda:%d: %s, %d SMs, compute capability %d.%d, %.1f GiB", device,
                p.name, p.multiProcessorCount, p.major, p.minor,
                double(p.totalGlobalMem) / double(1 << 30));
  return b;
}

std::string library_versions(cublasHandle_t h) {
  int rt = 0, blas = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  CUBLAS_CHECK(cublasGetVersion(h, &blas));
  const size_t dnn = cudnnGetVersion();
  char b[256];
  std::snprintf(b, sizeof b, "CUDA runtime %d.%d, cuBLAS %d.%d.%d, cuDNN %zu.%zu.%zu", rt / 1000,
                (rt % 1000) / 10, blas / 10000, (blas / 100) % 100, blas % 100, dnn / 10000,
                (dnn % 10000) / 100, dnn % 100);
  return b;
}

}  // namespace

CudaCeilings measure_cuda_ceilings(int device) {
  CudaCeilings c;
  c.device = device;
  c.name = device_name(device);
  cublasHandle_t h = kernels::cuda::cublas_handle(device);  // bound to the compute stream
  c.math = fp32_math_mode(h);
  c.libraries = library_versions(h);
  EventTimer timer(device);

  for (auto [n, reps] : {std::pair{1024, 20}, std::pair{2048, 10}, std::pair{4096, 5}}) {
    const int64_t count = int64_t(n) * n;
    DeviceBuffer<float> a(device, uniform(count, 1)), b(device, uniform(count, 2)),
        d(device, count);
    const float one = 1.f, zero = 0.f;
    const double s = timer.best_seconds(3, reps, [&] {
      CUBLAS_CHECK(
          cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, d, n));
    });
    const double g = 2.0 * n * n * double(n) / s * 1e-9;
    if (g > c.sgemm_gflops) {
      c.sgemm_gflops = g;
      c.sgemm_n = n;
    }
  }

  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t bytes = std::min<size_t>(size_t(256) << 20, free_bytes / 4 / 4 * 4);
  ENGINE_CHECK(bytes >= (size_t(1) << 20), "bench_kernels: only ", free_bytes,
               " bytes free on cuda:", device, " for the copy ceiling");
  const int64_t floats = static_cast<int64_t>(bytes / 4);
  DeviceBuffer<float> src(device, floats), dst(device, floats);
  cuda::fill_f32(device, src, 1.f, floats);
  const double s = timer.best_seconds(5, 10, [&] {
    CUDA_CHECK(
        cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, timer.stream()));
  });
  c.copy_gbs = 2.0 * double(bytes) / s * 1e-9;
  c.copy_mib = double(bytes) / double(1 << 20);
  return c;
}

void cuda_synchronize(int device) {
  cuda::synchronize(device, cuda::Stream::Compute);
}

#else  // no CUDA in this build

CudaCeilings measure_cuda_ceilings(int) {
  ENGINE_FAIL("bench_kernels: CUDA is not built in (configure with -DENGINE_CUDA=ON)");
}

void cuda_synchronize(int) {
  ENGINE_FAIL("bench_kernels: CUDA is not built in (configure with -DENGINE_CUDA=ON)");
}

#endif

std::vector<std::pair<std::string, std::string>> describe(const CudaCeilings& c) {
  char l[3][300];
  std::snprintf(l[0], sizeof l[0],
                "cuBLAS %s on the engine's handle (FP32, no TF32); cuDNN convolutions "
                "CUDNN_FMA_MATH (FP32, no TF32)",
                c.math.c_str());
  std::snprintf(l[1], sizeof l[1], "cuBLAS sgemm n=%d on cuda:%d: %.1f GFLOP/s", c.sgemm_n,
                c.device, c.sgemm_gflops);
  std::snprintf(l[2], sizeof l[2],
                "cudaMemcpyAsync device to device, %.0f MiB on cuda:%d: %.1f GB/s (read + write "
                "counted, as STREAM's copy)",
                c.copy_mib, c.device, c.copy_gbs);
  return {{"device", c.name},
          {"cuda_libraries", c.libraries},
          {"math", l[0]},
          {"ceiling_compute", l[1]},
          {"ceiling_memory", l[2]},
          {"timing",
           "per case: N calls queued on cuda:" + std::to_string(c.device) +
               "'s compute stream, the stream synchronised before the clock is read; time = wall "
               "time / N"}};
}

}  // namespace engine::bench
