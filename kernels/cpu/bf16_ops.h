// kernels/cpu/bf16_ops.h: the layers that run in bf16 under bf16 precision, as PyTorch's
// autocast runs them (convolutions and linear layers): each operand is rounded to bf16 (round to
// nearest even), products are summed in fp32, results are fp32. Inputs, weights and gradients stay
// fp32 tensors (fp32 master weights); each call rounds what it multiplies. Shapes and contracts are
// those of the fp32 functions in linear.h and conv2d.h. Each throws unless the CPU has AVX512_BF16
// (cpu_features.h). kernels::cuda has the same functions (cuBLAS / cuDNN, bf16 data, fp32 compute).
#pragma once
#include <cstdint>

#include "kernels/cpu/conv2d/bf16.h"  // the convolutions: conv2d_forward_bf16, ...
#include "kernels/linear.h"

namespace engine::kernels::cpu {

// The bf16 value nearest x (ties to even; NaN stays NaN), widened back to fp32.
float round_to_bf16(float x);
// dst[i] = round_to_bf16(src[i]) for i < count (dst may equal src).
void round_to_bf16(const float* src, float* dst, int64_t count);

void linear_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const LinearShape& s);
void linear_backward_data_bf16(const float* dy, const float* w, float* dx, const LinearShape& s);
void linear_backward_weight_bf16(const float* dy, const float* x, float* dw, const LinearShape& s,
                                 float beta);

// Batch-invariant schedules (the world-invariant mode's): the functions above take the rounding
// reference for products below kBf16GemmMinMacs, which sums in another order than the GEMM, so a
// sample's bits there depend on how many samples came with it (net's fc1, 320 -> 50: reference
// at N 16, GEMM at N 17). These take the GEMM at every N (each element of its C is summed in one
// fixed order whatever M is); the default keeps its choice, faster for small products. The weight
// gradients need none: a chunk of fixed size always makes the same choice.
void linear_forward_bf16_invariant(const float* x, const float* w, const float* b, float* y,
                                   const LinearShape& s);
void linear_backward_data_bf16_invariant(const float* dy, const float* w, float* dx,
                                         const LinearShape& s);

}  // namespace engine::kernels::cpu
