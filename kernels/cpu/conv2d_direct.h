// kernels/cpu/conv2d_direct.h: internal to conv2d.cpp: the AVX-512 direct convolution for
// stride 1, used when conv2d_direct_supported() says so. No im2col: a padded plane read at
// shifted offsets is the GEMM's B matrix ("flat" trick: output q = oh*Wp + ow reads q + kh*Wp + kw).
#pragma once
#include <cstdint>

#include "kernels/conv2d.h"

namespace engine::kernels::cpu::detail {

// True when this build has AVX-512 and the shape has stride 1 and pad <= k-1 on both axes.
bool direct_supported(const Conv2dShape& s);

// Workspace floats each pass needs with nthreads threads.
int64_t direct_forward_ws(const Conv2dShape& s, int nthreads);
int64_t direct_backward_data_ws(const Conv2dShape& s, int nthreads);
int64_t direct_backward_filter_ws(const Conv2dShape& s, int nthreads);

// Same contracts as conv2d_forward / conv2d_backward_data / conv2d_backward_filter.
void direct_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, float* ws);
void direct_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          float* ws);
void direct_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            float beta, float* ws);

}  // namespace engine::kernels::cpu::detail
