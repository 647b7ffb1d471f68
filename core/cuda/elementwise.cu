// core/cuda/elementwise.cu: core's in-place float32 kernels. Each is a grid-stride loop around the
// per-element function of core/elementwise.h that the CPU loops call too, so both compute alike.
#include <algorithm>

#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace engine::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill every SM of an H100 several times over; the loop strides over the rest.
constexpr int64_t kMaxBlocks = 4096;

int blocks_for(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

__global__ void fill_kernel(float* p, float v, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = v;
}

__global__ void axpy_kernel(float* dst, const float* src, float alpha, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = axpy_op(dst[i], src[i], alpha);
}

__global__ void scale_kernel(float* p, float s, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = scale_op(p[i], s);
}

}  // namespace

// Each launches on `device`'s compute stream (core/cuda/stream.cuh), in order with the kernels.
void fill_f32(int device, float* p, float v, int64_t n) {
  ENGINE_CHECK(n >= 0, "cuda::fill_f32: negative count ", n);
  if (n == 0) return;
  DeviceGuard guard(device);
  fill_kernel<<<blocks_for(n), kThreads, 0, compute_stream(device)>>>(p, v, n);
  CUDA_CHECK_LAUNCH();
}

void axpy_f32(int device, float* dst, const float* src, float alpha, int64_t n) {
  ENGINE_CHECK(n >= 0, "cuda::axpy_f32: negative count ", n);
  if (n == 0) return;
  DeviceGuard guard(device);
  axpy_kernel<<<blocks_for(n), kThreads, 0, compute_stream(device)>>>(dst, src, alpha, n);
  CUDA_CHECK_LAUNCH();
}

void scale_f32(int device, float* p, float s, int64_t n) {
  ENGINE_CHECK(n >= 0, "cuda::scale_f32: negative count ", n);
  if (n == 0) return;
  DeviceGuard guard(device);
  scale_kernel<<<blocks_for(n), kThreads, 0, compute_stream(device)>>>(p, s, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace engine::cuda
