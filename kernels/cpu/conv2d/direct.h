// kernels/cpu/conv2d/direct.h: internal to conv2d.cpp: the AVX-512 direct convolutions for
// stride 1 (direct.cpp runs them; direct_simd.h declares the kernels).
#pragma once
#include <cstdint>

#include "kernels/conv2d.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/pool.h"

namespace engine::kernels::cpu::detail {

// True when this build has AVX-512 and the shape has stride 1 and pad <= k-1 on both axes.
bool direct_supported(const Conv2dShape& s);
// Whether the channel-vector backward_weight handles this kernel width.
bool direct_channel_vector_weight_supported(const Conv2dShape& s);

// k: which direct kernel (ConvAlgo's Flat or ChannelVector); Auto picks per shape and pass.

// Workspace floats each pass needs with nthreads threads.
int64_t direct_forward_ws(const Conv2dShape& s, ConvAlgo k, int nthreads);
int64_t direct_backward_input_ws(const Conv2dShape& s, ConvAlgo k, int nthreads);
int64_t direct_backward_weight_ws(const Conv2dShape& s, ConvAlgo k, int nthreads);

// conv2d_pool_forward's shapes: a one-channel input (direct_one_channel.cpp), and its kernel.
bool direct_pool_supported(const Conv2dShape& s);
void direct_forward_pool(const float* x, const float* w, const float* b, float* y, int32_t* arg,
                         const Conv2dShape& s, const Pool2dShape& ps, bool relu);

// Same contracts as conv2d_forward / conv2d_backward_input / conv2d_backward_weight.
void direct_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
                    ConvAlgo k, float* ws);
void direct_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                           ConvAlgo k, float* ws);
void direct_backward_weight(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta, ConvAlgo k, float* ws);

}  // namespace engine::kernels::cpu::detail
