// kernels/cpu/conv2d/conv2d.h: CPU 2-d convolution (stride, padding, bias; dilation 1, groups 1),
// the entry point of this folder. Stride 1 with pad <= k-1 runs a direct AVX-512 kernel (no
// im2col); anything else, or a build without AVX-512, runs im2col + OpenBLAS sgemm one sample at
// a time.
//
// Reading order (each file's first line says what it owns):
//   1. reference.h, reference.cpp: the definition, plain loops (~80 lines). Start here.
//   2. conv2d.cpp: this header's functions, choosing a path; im2col.h, im2col.cpp: the
//      im2col + sgemm path, for any shape.
//   3. The direct stride-1 kernels (AVX-512): direct.h, direct.cpp (batch loops, workspaces, which
//      kernel per shape and pass), direct_simd.h (shared helpers, the kernels' declarations), then
//      direct_flat.cpp (vectors over output positions: ConvAlgo::Flat),
//      direct_channel_vector.cpp (vectors over 16 output channels: ConvAlgo::ChannelVector) and
//      direct_one_channel.cpp (the forward of a one-channel input: a model's first layer).
//   4. bf16 (bf16 precision): bf16.h, bf16.cpp (which pass takes which path),
//      reference_bf16.cpp (the rounding reference), bf16_flat.h, bf16_flat.cpp (the stride-1
//      passes on the bf16 GEMM of kernels/cpu/gemm_bf16.h).
// The passes are named forward, backward_input (dx), backward_weight (dw, with db fused) and
// backward_bias (db alone), here, in the references and in kernels::cuda.
//
// Workspace: the caller passes ws with at least conv2d_workspace_count(s) floats, queried at the
// thread count the call will run with. The overloads without ws (kernels::cuda's arguments, for
// kernels::call) take it from the CPU allocator's cache, as cuDNN's from the caching allocator.
#pragma once
#include <cstdint>

#include "kernels/conv2d.h"
#include "kernels/pool.h"

namespace engine::kernels::cpu {

// Auto picks per shape and pass; the others force a kernel (tests, benchmarks): Flat and
// ChannelVector are the two direct kernels (direct_simd.h), Im2col the GEMM path.
enum class ConvAlgo { Auto, Flat, ChannelVector, Im2col };

enum class ConvPass { Forward, BackwardInput, BackwardWeight };

// Whether a forced algo runs this shape and pass (Auto and Im2col always do; the direct ones
// need AVX-512, stride 1 and pad <= k-1; ChannelVector's weight pass needs KW 3 or 5).
bool conv2d_algo_supported(const Conv2dShape& s, ConvAlgo algo, ConvPass pass);

// Floats of workspace any of the passes below needs with the current num_threads().
int64_t conv2d_workspace_count(const Conv2dShape& s, ConvAlgo algo = ConvAlgo::Auto);

// y (N, Cout, OH, OW) = conv(x (N, Cin, H, W), w (Cout, Cin, KH, KW)) + b (Cout); b may be null.
void conv2d_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
                    float* ws, int64_t ws_count, ConvAlgo algo = ConvAlgo::Auto);

// Whether conv2d_pool_forward runs these shapes: a one-channel input (a model's first layer),
// stride 1, pad <= k-1, on a CPU with AVX-512.
bool conv2d_pool_supported(const Conv2dShape& s);
// y, arg (N, Cout, PH, PW) = max_pool2d_forward (relu: max_pool2d_relu_forward) of conv2d_forward
// (x, w, b) with ps the pool's shape over the convolution's output: each block of output planes
// is pooled while in cache, the convolution's output never written (the same floats as the two
// kernels). Needs conv2d_pool_supported(s).
void conv2d_pool_forward(const float* x, const float* w, const float* b, float* y, int32_t* arg,
                         const Conv2dShape& s, const Pool2dShape& ps, bool relu);

// dx (N, Cin, H, W) = conv2d input gradient of dy (N, Cout, OH, OW). Overwrites dx.
void conv2d_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                           float* ws, int64_t ws_count, ConvAlgo algo = ConvAlgo::Auto);

// dw (Cout, Cin, KH, KW) = beta * dw + sum_n dy[n] (*) x[n], and when db is not null
// db (Cout) = beta * db + sum over N, OH, OW of dy (fused: dy is read once). beta 0 overwrites.
void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta, float* ws, int64_t ws_count,
                            ConvAlgo algo = ConvAlgo::Auto);

// The same three passes with ConvAlgo::Auto and a workspace from core's CPU allocator.
void conv2d_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s);
void conv2d_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s);
void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta);

// db (Cout) = beta * db + sum over N, OH, OW of dy (N, Cout, OH, OW). beta 0 overwrites.
void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, float beta);

}  // namespace engine::kernels::cpu
