// kernels/cpu/conv2d/bf16_flat.h: internal to bf16.cpp: the stride-1 convolution passes on the
// bf16 GEMM (gemm_bf16.h) without im2col buffers. Inputs are zero-padded into planes of width
// Wp = W + 2 pad and read in place: output position q = oh * Wp + ow ("flat", as direct_flat.cpp)
// sees input k = (ci, kh, kw) at q + ci * Hp * Wp + kh * Wp + kw; the Wp - OW positions past each
// output row are computed and dropped where that wastes little, else only the OH * OW outputs are
// (through a table of row offsets). The forward reads its input as bf16 channel pairs in place
// (no packing: the pair of k = (2i, kh, kw) and (2i + 1, kh, kw) is one 32-bit word), so the
// channel counts must be even. The weight gradient reads bf16 runs of q the same way.
#pragma once

#include "kernels/conv2d.h"

namespace engine::kernels::cpu::detail {

// What conv2d_forward / backward_input_bf16_flat take: stride 1, pad <= k - 1, even Cin and Cout.
bool conv2d_bf16_flat_supported(const Conv2dShape& s);
// What conv2d_backward_weight_bf16_flat takes: stride 1.
bool conv2d_bf16_flat_weight_supported(const Conv2dShape& s);

void conv2d_forward_bf16_flat(const float* x, const float* w, const float* b, float* y,
                              const Conv2dShape& s);
// The forward of dy (padded by k - 1 - pad) with w flipped and transposed.
void conv2d_backward_input_bf16_flat(const float* dy, const float* w, float* dx,
                                     const Conv2dShape& s);
// dw^T (K, Cout) = sum over samples of col (K, Q) dy^T (Q, Cout) (+ beta dw); db (when not
// null) = the fp32 sum of dy (+ beta db), as conv2d_backward_bias, taken while dy is copied.
void conv2d_backward_weight_bf16_flat(const float* x, const float* dy, float* dw, float* db,
                                      const Conv2dShape& s, float beta);

}  // namespace engine::kernels::cpu::detail
