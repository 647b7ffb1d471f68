// kernels/cpu/reference_bf16.h: the bf16 layers by rounding, the reference the vdpbf16ps kernels
// (bf16_ops.h) are checked against: each operand is rounded to bf16 (round_to_bf16) into an fp32
// buffer and the fp32 kernels multiply the rounded values (every product of two bf16 values is
// exact in fp32, so this is bf16 multiplication with fp32 accumulation). Shapes and contracts are
// those of bf16_ops.h; these run on any CPU.
#pragma once

#include "kernels/conv2d.h"
#include "kernels/linear.h"

namespace engine::kernels::cpu {

void linear_forward_bf16_reference(const float* x, const float* w, const float* b, float* y,
                                   const LinearShape& s);
void linear_backward_data_bf16_reference(const float* dy, const float* w, float* dx,
                                         const LinearShape& s);
void linear_backward_weight_bf16_reference(const float* dy, const float* x, float* dw,
                                           const LinearShape& s, float beta);

void conv2d_forward_bf16_reference(const float* x, const float* w, const float* b, float* y,
                                   const Conv2dShape& s);
void conv2d_backward_data_bf16_reference(const float* dy, const float* w, float* dx,
                                         const Conv2dShape& s);
void conv2d_backward_filter_bf16_reference(const float* x, const float* dy, float* dw, float* db,
                                           const Conv2dShape& s, float beta);

}  // namespace engine::kernels::cpu
