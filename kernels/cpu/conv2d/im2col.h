// kernels/cpu/conv2d/im2col.h: internal to conv2d.cpp: the im2col + sgemm passes (im2col.cpp),
// for any stride and padding, one sample at a time through a workspace of one column matrix.
#pragma once
#include <cstdint>

#include "kernels/conv2d.h"

namespace engine::kernels::cpu::detail {

// Floats of workspace each pass needs: the column matrix (K, OH*OW) of one sample.
int64_t im2col_workspace_count(const Conv2dShape& s);

// Contracts of conv2d_forward / conv2d_backward_input / conv2d_backward_weight (without db);
// ws holds im2col_workspace_count(s) floats.
void im2col_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
                    float* ws);
void im2col_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                           float* ws);
void im2col_backward_weight(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            float beta, float* ws);

}  // namespace engine::kernels::cpu::detail
