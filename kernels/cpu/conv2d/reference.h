// kernels/cpu/conv2d/reference.h: the convolution's references, in kernels::ref with the others
// (kernels/cpu/reference.h): plain loops in double (reference.cpp) and the bf16 rounding
// reference (reference_bf16.cpp), what the kernels of this folder are checked against.
#pragma once

#include "kernels/conv2d.h"

namespace engine::kernels::ref {

// x (N, Cin, H, W), w (Cout, Cin, KH, KW), b (Cout) or null, y (N, Cout, OH, OW).
void conv2d_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s);
// dx (N, Cin, H, W) from dy (N, Cout, OH, OW); dw (Cout, Cin, KH, KW); db (Cout). Overwrite.
void conv2d_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s);
void conv2d_backward_weight(const float* x, const float* dy, float* dw, const Conv2dShape& s);
void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s);

// bf16 by rounding (see kernels/cpu/reference_bf16.h): each operand rounded to bf16, then the
// fp32 kernels of conv2d.h; contracts those of bf16.h. bf16.cpp also runs these on the shapes
// its GEMM does not pay off on.
void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s);
void conv2d_backward_input_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s);
void conv2d_backward_weight_bf16(const float* x, const float* dy, float* dw, float* db,
                                 const Conv2dShape& s, float beta);

}  // namespace engine::kernels::ref
