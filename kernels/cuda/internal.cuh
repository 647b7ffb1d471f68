// kernels/cuda/internal.cuh: helpers shared by the kernels/cuda/*.cu files (not for callers).
#pragma once
#include <cstdint>

namespace engine::kernels::cuda::detail {

// out (C) = beta * out + sum over N, HW of x (N, C, HW), one block per channel, fixed order.
void channel_sum(int device, const float* x, float* out, int64_t n, int64_t c, int64_t hw,
                 float beta);

// dst = beta * dst, as a GEMM with an empty sum leaves it: beta 0 writes zeros (the CPU's
// answer), where multiplying by 0 would keep NaN and Inf left in a fresh block.
void scale_or_zero(int device, float* dst, int64_t count, float beta);

}  // namespace engine::kernels::cuda::detail
