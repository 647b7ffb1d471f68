// kernels/cpu/conv2d/bf16.h: the convolution in bf16 (bf16 precision), part of the bf16 layers
// of kernels/cpu/bf16_ops.h (which includes this and has the contract): operands rounded to bf16,
// products summed in fp32, fp32 results; shapes and contracts those of conv2d.h. Each throws
// unless the CPU has AVX512_BF16. Checked against ref::conv2d_*_bf16 (reference.h).
#pragma once

#include "kernels/conv2d.h"

namespace engine::kernels::cpu {

void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s);
void conv2d_backward_input_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s);
// db, when not null, is the fp32 sum of dy (the bias gradient is not a product).
void conv2d_backward_weight_bf16(const float* x, const float* dy, float* dw, float* db,
                                 const Conv2dShape& s, float beta);

// Batch-invariant schedules (bf16_ops.h's linear ones): the GEMM wherever it runs the shape, at
// every N; the functions above take the reference for small products.
void conv2d_forward_bf16_invariant(const float* x, const float* w, const float* b, float* y,
                                   const Conv2dShape& s);
void conv2d_backward_input_bf16_invariant(const float* dy, const float* w, float* dx,
                                          const Conv2dShape& s);

}  // namespace engine::kernels::cpu
