// kernels/cuda/check.cuh: CUBLAS_CHECK and CUDNN_CHECK (CUDA_CHECK is core's, core/cuda/check.cuh),
// each routed through one throwing function naming file, line, call and status; launch helpers.
#pragma once
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"

namespace engine::kernels::cuda {

[[noreturn]] void cublas_fail(cublasStatus_t st, const char* expr, const char* file, int line);
[[noreturn]] void cudnn_fail(cudnnStatus_t st, const char* expr, const char* file, int line);

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times; grid-stride loops cover the rest.
constexpr int64_t kMaxBlocks = 65535;

inline int blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, kMaxBlocks)));
}

}  // namespace engine::kernels::cuda

#define CUBLAS_CHECK(expr)                                                                \
  do {                                                                                    \
    const cublasStatus_t engine_cublas_st_ = (expr);                                      \
    if (engine_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                       \
      ::engine::kernels::cuda::cublas_fail(engine_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUDNN_CHECK(expr)                                                               \
  do {                                                                                  \
    const cudnnStatus_t engine_cudnn_st_ = (expr);                                      \
    if (engine_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                       \
      ::engine::kernels::cuda::cudnn_fail(engine_cudnn_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// A grid-stride loop over [0, n): for (ENGINE_GRID_LOOP(i, n)) { ... }
#define ENGINE_GRID_LOOP(i, n)                                             \
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
  i < (n);                                                                 \
  i += static_cast<int64_t>(gridDim.x) * blockDim.x
