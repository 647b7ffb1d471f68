// kernels/cpu/pool.h: CPU 2-d max pooling (k x k window, stride s, no padding, floor mode).
#pragma once
#include <cstdint>

#include "kernels/pool.h"

namespace engine::kernels::cpu {

// y (N, C, OH, OW) = window maxima of x (N, C, H, W); arg (N, C, OH, OW) = index of each max
// within its (H, W) plane (h*W + w), as torch's return_indices.
void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s);

// y = relu(max_pool2d(x)) (= max_pool2d(relu(x))) in one pass; arg as max_pool2d_forward's.
void max_pool2d_relu_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s);

// y = max_pool2d(x * alpha[c] + shift[c]) per channel c (relu: relu of it), arg as
// max_pool2d_forward's: batch norm's affine (alpha, shift (C), kernels/batchnorm.h's bn_affine)
// folded into the pooling pass, so the normalised tensor is never written.
void max_pool2d_affine_forward(const float* x, const float* alpha, const float* shift, float* y,
                               int32_t* arg, const Pool2dShape& s, bool relu);
// max_pool2d_forward (relu: max_pool2d_relu_forward) of `planes` consecutive (H, W) planes of x,
// on the calling thread: for a kernel that pools what it has just computed (s's n and c unused).
void max_pool2d_planes(const float* x, float* y, int32_t* arg, int64_t planes, const Pool2dShape& s,
                       bool relu);
// dx (N, C, H, W) = dy routed to the argmax of each window (summed where windows overlap).
// Overwrites dx.
void max_pool2d_backward(const float* dy, const int32_t* arg, float* dx, const Pool2dShape& s);
// Backward of max_pool2d_relu_forward (y its output): max_pool2d_backward of relu_grad(dy, y), in
// one loop. Overwrites dx.
void max_pool2d_relu_backward(const float* dy, const float* y, const int32_t* arg, float* dx,
                              const Pool2dShape& s);

}  // namespace engine::kernels::cpu
