// kernels/cpu/dropout.h: CPU dropout (elementwise) and dropout2d (whole (n, c) planes).
// Masks come from Philox (kernels/dropout.h): the same (seed, offset) gives the same mask on
// CPU and CUDA and in forward and backward, so backward can draw it again (dropout_backward) or
// read the one byte per element that dropout_forward_mask kept (dropout_backward_mask: no Philox
// in backward). The caller takes offset = Generator::reserve(count) (dropout) or
// reserve(planes) (dropout2d).
#pragma once
#include <cstdint>

#include "kernels/dropout.h"

namespace engine::kernels::cpu {

// y[i] = x[i] / (1-p) if dropout_keep(seed, offset, i, p) else 0; y may alias x.
void dropout_forward(const float* x, float* y, int64_t count, float p, uint64_t seed,
                     uint64_t offset);
// dx[i] = dy[i] / (1-p) under the same mask; dx may alias dy.
void dropout_backward(const float* dy, float* dx, int64_t count, float p, uint64_t seed,
                      uint64_t offset);
// dropout_forward that also writes mask[i] = 1 if element i is kept, else 0 (dropout_mask's).
void dropout_forward_mask(const float* x, float* y, uint8_t* mask, int64_t count, float p,
                          uint64_t seed, uint64_t offset);
// dx[i] = mask[i] ? dy[i] / (1-p) : 0, the mask from dropout_forward_mask; dx may alias dy.
void dropout_backward_mask(const float* dy, const uint8_t* mask, float* dx, int64_t count, float p);

// x, y (N, C, H, W) as (planes = N*C, plane_size = H*W): plane q kept when
// dropout_keep(seed, offset, q, p), then scaled by 1/(1-p).
void dropout2d_forward(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                       uint64_t seed, uint64_t offset);
void dropout2d_backward(const float* dy, float* dx, int64_t planes, int64_t plane_size, float p,
                        uint64_t seed, uint64_t offset);

// By global position (kernels/dropout.h): the same masks for a slice of a longer stream, element
// (or plane) i of the call drawing as element first + i of (seed, offset). Overlapping calls give
// the same decision for the same stream element, whatever their starts, lengths and thread counts;
// first 0 gives the functions above bit for bit.
void dropout_forward_at(const float* x, float* y, int64_t count, float p, uint64_t seed,
                        uint64_t offset, uint64_t first);
void dropout_backward_at(const float* dy, float* dx, int64_t count, float p, uint64_t seed,
                         uint64_t offset, uint64_t first);
void dropout_forward_mask_at(const float* x, float* y, uint8_t* mask, int64_t count, float p,
                             uint64_t seed, uint64_t offset, uint64_t first);
void dropout2d_forward_at(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                          uint64_t seed, uint64_t offset, uint64_t first_plane);
void dropout2d_backward_at(const float* dy, float* dx, int64_t planes, int64_t plane_size, float p,
                           uint64_t seed, uint64_t offset, uint64_t first_plane);

// mask[i] = 1 if element (or plane) i is kept, else 0, for i < count (tests, debugging).
void dropout_mask(uint8_t* mask, int64_t count, float p, uint64_t seed, uint64_t offset);

}  // namespace engine::kernels::cpu
