// kernels/cuda/activation.cu: ReLU and dropout, grid-stride loops around kernels/activation.h
// and kernels/dropout.h. Dropout draws the same Philox numbers as the CPU: element i of a call
// uses lane i % 4 of philox4x32(offset + i / 4, 0, seed), one Philox call per group of 4. The
// _mask variants keep one byte per element for a backward without Philox. Under a captured CUDA
// graph the offset is read on the device (DropoutOffsetSource, kernels/dropout.h).
#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/dropout.h"

namespace engine::kernels::cuda {
namespace {

__global__ void relu_forward_kernel(const float* x, float* y, int64_t count) {
  for (ENGINE_GRID_LOOP(i, count)) y[i] = relu(x[i]);
}

__global__ void relu_backward_kernel(const float* dy, const float* y, float* dx, int64_t count) {
  for (ENGINE_GRID_LOOP(i, count)) dx[i] = relu_grad(dy[i], y[i]);
}

// One thread per group of 4 elements; mask (when not null) gets each element's keep as 0 or 1.
// Element i of the call is element first + i of the stream: stream group first / 4 + g holds
// call elements 4g - lead .. 4g - lead + 3 (lead = first % 4; 0 for the default dropout).
__global__ void dropout_kernel(const float* src, float* dst, uint8_t* mask, int64_t count, float p,
                               uint64_t seed, uint64_t rel, const uint64_t* base, uint64_t first) {
  const float s = dropout_scale(p);
  const uint64_t offset = dropout_offset(base, rel);
  const int64_t lead = static_cast<int64_t>(first % 4), groups = (lead + count + 3) / 4;
  for (ENGINE_GRID_LOOP(g, groups)) {
    bool keep[4];
    dropout_keep4(seed, offset, first / 4 + static_cast<uint64_t>(g), p, keep);
    for (int64_t j = 0; j < 4; ++j) {
      const int64_t i = 4 * g + j - lead;
      if (i < 0 || i >= count) continue;
      dst[i] = dropout_apply(src[i], keep[j], s);
      if (mask) mask[i] = keep[j] ? 1 : 0;
    }
  }
}

__global__ void dropout_mask_backward_kernel(const float* dy, const uint8_t* mask, float* dx,
                                             int64_t count, float p) {
  const float s = dropout_scale(p);
  for (ENGINE_GRID_LOOP(i, count)) dx[i] = dropout_apply(dy[i], mask[i] != 0, s);
}

// One thread per element; plane q = i / plane_size keeps dropout_keep(seed, offset, q, p), taken
// here as lane q % 4 of dropout_keep4 (the same draw), picked without a dynamic index so that the
// four decisions stay in registers instead of a stack array.
__global__ void dropout2d_kernel(const float* src, float* dst, int64_t planes, int64_t plane_size,
                                 float p, uint64_t seed, uint64_t rel, const uint64_t* base,
                                 uint64_t first_plane) {
  const float s = dropout_scale(p);
  const uint64_t offset = dropout_offset(base, rel);
  for (ENGINE_GRID_LOOP(i, planes * plane_size)) {
    const uint64_t q = first_plane + static_cast<uint64_t>(i / plane_size);
    bool keep[4];
    dropout_keep4(seed, offset, q >> 2, p, keep);
    const unsigned lane = static_cast<unsigned>(q & 3);
    const bool k = lane == 0 ? keep[0] : lane == 1 ? keep[1] : lane == 2 ? keep[2] : keep[3];
    dst[i] = dropout_apply(src[i], k, s);
  }
}

void check_count(int64_t count, const char* what) {
  ENGINE_CHECK(count >= 0, what, ": negative count ", count);
}

void check_p(float p, const char* what) {
  ENGINE_CHECK(p >= 0.f && p <= 1.f, what, ": p must be in [0, 1], got ", p);
}

// (base, rel) for the kernels' dropout_offset: see DropoutOffsetSource (kernels/dropout.h).
struct OffsetArg {
  const uint64_t* base;
  uint64_t rel;
};

OffsetArg offset_arg(uint64_t offset, const char* what) {
  const DropoutOffsetSource& src = dropout_offset_source();
  if (!src.base) return {nullptr, offset};
  ENGINE_CHECK(offset >= src.host_base, what, ": offset ", offset,
               " precedes the captured graph's first (", src.host_base,
               "): a generator other than the captured step's");
  return {src.base, offset - src.host_base};
}

void launch_dropout(int device, const float* src, float* dst, uint8_t* mask, int64_t count, float p,
                    uint64_t seed, uint64_t offset, uint64_t first, const char* what) {
  check_count(count, what);
  check_p(p, what);
  if (count == 0) return;
  const OffsetArg o = offset_arg(offset, what);
  ::engine::cuda::DeviceGuard guard(device);
  dropout_kernel<<<blocks_for((static_cast<int64_t>(first % 4) + count + 3) / 4), kThreads, 0,
                   ::engine::cuda::compute_stream(device)>>>(src, dst, mask, count, p, seed, o.rel,
                                                             o.base, first);
  CUDA_CHECK_LAUNCH();
}

void launch_dropout2d(int device, const float* src, float* dst, int64_t planes, int64_t plane_size,
                      float p, uint64_t seed, uint64_t offset, uint64_t first_plane,
                      const char* what) {
  check_count(planes, what);
  check_count(plane_size, what);
  check_p(p, what);
  if (planes == 0 || plane_size == 0) return;
  const OffsetArg o = offset_arg(offset, what);
  ::engine::cuda::DeviceGuard guard(device);
  dropout2d_kernel<<<blocks_for(planes * plane_size), kThreads, 0,
                     ::engine::cuda::compute_stream(device)>>>(src, dst, planes, plane_size, p,
                                                               seed, o.rel, o.base, first_plane);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void relu_forward(int device, const float* x, float* y, int64_t count) {
  check_count(count, "cuda::relu_forward");
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  relu_forward_kernel<<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(
      x, y, count);
  CUDA_CHECK_LAUNCH();
}

void relu_backward(int device, const float* dy, const float* y, float* dx, int64_t count) {
  check_count(count, "cuda::relu_backward");
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  relu_backward_kernel<<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(
      dy, y, dx, count);
  CUDA_CHECK_LAUNCH();
}

void dropout_forward(int device, const float* x, float* y, int64_t count, float p, uint64_t seed,
                     uint64_t offset) {
  launch_dropout(device, x, y, nullptr, count, p, seed, offset, 0, "cuda::dropout_forward");
}

void dropout_backward(int device, const float* dy, float* dx, int64_t count, float p, uint64_t seed,
                      uint64_t offset) {
  launch_dropout(device, dy, dx, nullptr, count, p, seed, offset, 0, "cuda::dropout_backward");
}

void dropout_forward_mask(int device, const float* x, float* y, uint8_t* mask, int64_t count,
                          float p, uint64_t seed, uint64_t offset) {
  ENGINE_CHECK(mask || count == 0, "cuda::dropout_forward_mask: mask is null");
  launch_dropout(device, x, y, mask, count, p, seed, offset, 0, "cuda::dropout_forward_mask");
}

void dropout_backward_mask(int device, const float* dy, const uint8_t* mask, float* dx,
                           int64_t count, float p) {
  check_count(count, "cuda::dropout_backward_mask");
  check_p(p, "cuda::dropout_backward_mask");
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  dropout_mask_backward_kernel<<<blocks_for(count), kThreads, 0,
                                 ::engine::cuda::compute_stream(device)>>>(dy, mask, dx, count, p);
  CUDA_CHECK_LAUNCH();
}

void dropout2d_forward(int device, const float* x, float* y, int64_t planes, int64_t plane_size,
                       float p, uint64_t seed, uint64_t offset) {
  launch_dropout2d(device, x, y, planes, plane_size, p, seed, offset, 0, "cuda::dropout2d_forward");
}

void dropout2d_backward(int device, const float* dy, float* dx, int64_t planes, int64_t plane_size,
                        float p, uint64_t seed, uint64_t offset) {
  launch_dropout2d(device, dy, dx, planes, plane_size, p, seed, offset, 0,
                   "cuda::dropout2d_backward");
}

void dropout_forward_at(int device, const float* x, float* y, int64_t count, float p, uint64_t seed,
                        uint64_t offset, uint64_t first) {
  launch_dropout(device, x, y, nullptr, count, p, seed, offset, first, "cuda::dropout_forward_at");
}

void dropout_backward_at(int device, const float* dy, float* dx, int64_t count, float p,
                         uint64_t seed, uint64_t offset, uint64_t first) {
  launch_dropout(device, dy, dx, nullptr, count, p, seed, offset, first,
                 "cuda::dropout_backward_at");
}

void dropout_forward_mask_at(int device, const float* x, float* y, uint8_t* mask, int64_t count,
                             float p, uint64_t seed, uint64_t offset, uint64_t first) {
  ENGINE_CHECK(mask || count == 0, "cuda::dropout_forward_mask_at: mask is null");
  launch_dropout(device, x, y, mask, count, p, seed, offset, first,
                 "cuda::dropout_forward_mask_at");
}

void dropout2d_forward_at(int device, const float* x, float* y, int64_t planes, int64_t plane_size,
                          float p, uint64_t seed, uint64_t offset, uint64_t first_plane) {
  launch_dropout2d(device, x, y, planes, plane_size, p, seed, offset, first_plane,
                   "cuda::dropout2d_forward_at");
}

void dropout2d_backward_at(int device, const float* dy, float* dx, int64_t planes,
                           int64_t plane_size, float p, uint64_t seed, uint64_t offset,
                           uint64_t first_plane) {
  launch_dropout2d(device, dy, dx, planes, plane_size, p, seed, offset, first_plane,
                   "cuda::dropout2d_backward_at");
}

}  // namespace engine::kernels::cuda
