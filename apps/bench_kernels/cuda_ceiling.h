// apps/bench_kernels/cuda_ceiling.h: owns what bench_kernels --device cuda measures and says
// before its cases: the device, the math modes its checks rely on (cuBLAS FP32 without TF32),
// and its ceilings: cuBLAS SGEMM for compute, a device-to-device copy for memory. Each is timed
// between cudaEvents on the device's compute stream, best of several batches after a warm-up.
// In a build without CUDA every function throws engine::Error (bench_kernels checks for a
// device before calling any).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace engine::bench {

struct CudaCeilings {
  int device = 0;
  std::string name;         // "NVIDIA H100 80GB HBM3, 132 SMs, compute capability 9.0, 80 GiB"
  std::string libraries;    // "CUDA runtime 13.0, cuBLAS 13.0.0, cuDNN 9.x"
  std::string math;         // the cuBLAS handle's math mode, checked to be FP32
  double sgemm_gflops = 0;  // best square SGEMM over the sizes tried
  int sgemm_n = 0;          // the size that gave it
  double copy_gbs = 0;      // cudaMemcpyAsync device to device, read + write counted (STREAM copy)
  double copy_mib = 0;      // size of the copied array
};

// Throws engine::Error when the engine's cuBLAS handle of `device` is not in an FP32 math mode
// (CUBLAS_DEFAULT_MATH or CUBLAS_PEDANTIC_MATH, without TF32 tensor ops).
CudaCeilings measure_cuda_ceilings(int device);

// (key, human-readable value) pairs, reported before any case.
std::vector<std::pair<std::string, std::string>> describe(const CudaCeilings& c);

// Blocks the host until the compute stream of `device` (where every engine kernel runs) has
// finished its queued work.
void cuda_synchronize(int device);

}  // namespace engine::bench
