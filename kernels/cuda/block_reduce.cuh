// kernels/cuda/block_reduce.cuh: deterministic block-wide sums. Each thread accumulates its
// strided share in a fixed order, then a fixed shared-memory tree combines the blockDim.x
// partials, so the bits depend only on the data and kThreads, never on scheduling.
#pragma once
#include "kernels/cuda/check.cuh"

namespace engine::kernels::cuda {

// Sum over the block of v (one value per thread, blockDim.x == kThreads). Every thread gets the
// result. Uses `scratch` (kThreads doubles of shared memory) and synchronises the block.
__device__ __forceinline__ double block_sum(double v, double* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) scratch[t] += scratch[t + half];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return total;
}

// Two sums at once (one pass over the data for both).
__device__ __forceinline__ void block_sum2(double& a, double& b, double* sa, double* sb) {
  const unsigned t = threadIdx.x;
  sa[t] = a;
  sb[t] = b;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      sa[t] += sa[t + half];
      sb[t] += sb[t + half];
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
  __syncthreads();
}

// Element j of channel c of a (N, C, HW) tensor, j in [0, N*HW).
__device__ __forceinline__ int64_t channel_index(int64_t c, int64_t j, int64_t channels,
                                                 int64_t hw) {
  const int64_t n = j / hw;
  return (n * channels + c) * hw + (j - n * hw);
}

}  // namespace engine::kernels::cuda
