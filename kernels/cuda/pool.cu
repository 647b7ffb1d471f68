// kernels/cuda/pool.cu: 2-d max pooling (and max pooling fused with relu) around kernels/pool.h's
// max_pool_window and kernels/activation.h.
// Forward: one thread per output. Backward: one thread per input element, which gathers dy from
// every window covering it whose argmax is that element (in window order): no atomics, so the
// sums where windows overlap are deterministic.
#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/choice.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/pool_gather.h"
#include "kernels/pool.h"

namespace engine::kernels::cuda {
namespace {

// With Relu: relu of the max (arg as without).
template <bool Relu>
__global__ void max_pool_forward_kernel(const float* x, float* y, int32_t* arg, Pool2dShape s) {
  const int64_t oh = s.oh(), ow = s.ow(), per_plane = oh * ow;
  for (ENGINE_GRID_LOOP(i, s.planes() * per_plane)) {
    const int64_t q = i / per_plane, r = (i - q * per_plane) / ow, c = i - q * per_plane - r * ow;
    const float m =
        max_pool_window(x + q * s.h * s.w, s.w, r * s.stride, c * s.stride, s.k, &arg[i]);
    y[i] = Relu ? relu(m) : m;
  }
}

// Windows (r, c) with r*stride <= row < r*stride + k, i.e. r in [ceil((row-k+1)/stride),
// row/stride], clipped to [0, oh).
__device__ __forceinline__ void covering(int64_t pos, int64_t k, int64_t stride, int64_t out,
                                         int64_t* lo, int64_t* hi) {
  const int64_t first = pos - k + 1;
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = min(pos / stride, out - 1);
}

// With Relu (y the forward's output): the gradient through relu first, relu_grad(dy, y).
template <bool Relu>
__global__ void max_pool_backward_kernel(const float* dy, const float* y, const int32_t* arg,
                                         float* dx, Pool2dShape s) {
  const int64_t oh = s.oh(), ow = s.ow(), plane = s.h * s.w;
  for (ENGINE_GRID_LOOP(i, s.planes() * plane)) {
    const int64_t q = i / plane, pos = i - q * plane, row = pos / s.w, col = pos - row * s.w;
    int64_t r0, r1, c0, c1;
    covering(row, s.k, s.stride, oh, &r0, &r1);
    covering(col, s.k, s.stride, ow, &c0, &c1);
    float g = 0.f;
    const int64_t base = q * oh * ow;
    for (int64_t r = r0; r <= r1; ++r)
      for (int64_t c = c0; c <= c1; ++c)
        if (arg[base + r * ow + c] == pos) {
          const int64_t o = base + r * ow + c;
          g += Relu ? relu_grad(dy[o], y[o]) : dy[o];
        }
    dx[i] = g;
  }
}

template <bool Relu>
__global__ void engine_pool_backward_kernel(const float* dy, const float* y, const int32_t* arg,
                                            float* dx, PoolGeom g, int32_t count) {
  const int32_t step = static_cast<int32_t>(gridDim.x * blockDim.x);
  for (int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); i < count;
       i += step)
    dx[i] = pool_gather<Relu>(dy, y, arg, g, i);
}

void check(const Pool2dShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.c > 0 && s.k > 0 && s.stride > 0 && s.h >= s.k && s.w >= s.k, what,
               ": bad shape (", s.n, ", ", s.c, ", ", s.h, ", ", s.w, ") for window ", s.k,
               " stride ", s.stride);
  ENGINE_CHECK(s.h * s.w <= INT32_MAX, what, ": plane over 2^31 elements for int32 indices");
}

template <bool Relu>
void launch_forward(int device, const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  const int64_t count = s.planes() * s.oh() * s.ow();
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  max_pool_forward_kernel<Relu>
      <<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(x, y, arg, s);
  CUDA_CHECK_LAUNCH();
}

template <bool Relu>
void launch_backward(int device, const float* dy, const float* y, const int32_t* arg, float* dx,
                     const Pool2dShape& s) {
  const int64_t count = s.planes() * s.h * s.w;
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  // count + a grid's stride stays under 2^31: int32 indices cannot wrap.
  if (cuda_kernels() == CudaKernels::Engine && count < INT32_MAX / 2) {
    const PoolGeom g{static_cast<int32_t>(s.h),    static_cast<int32_t>(s.w),
                     static_cast<int32_t>(s.k),    static_cast<int32_t>(s.stride),
                     static_cast<int32_t>(s.oh()), static_cast<int32_t>(s.ow())};
    engine_pool_backward_kernel<Relu>
        <<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(
            dy, y, arg, dx, g, static_cast<int32_t>(count));
    CUDA_CHECK_LAUNCH();
    return;
  }
  max_pool_backward_kernel<Relu>
      <<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(dy, y, arg, dx,
                                                                                   s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void max_pool2d_forward(int device, const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  check(s, "cuda::max_pool2d_forward");
  launch_forward<false>(device, x, y, arg, s);
}

void max_pool2d_relu_forward(int device, const float* x, float* y, int32_t* arg,
                             const Pool2dShape& s) {
  check(s, "cuda::max_pool2d_relu_forward");
  launch_forward<true>(device, x, y, arg, s);
}

void max_pool2d_backward(int device, const float* dy, const int32_t* arg, float* dx,
                         const Pool2dShape& s) {
  check(s, "cuda::max_pool2d_backward");
  launch_backward<false>(device, dy, nullptr, arg, dx, s);
}

void max_pool2d_relu_backward(int device, const float* dy, const float* y, const int32_t* arg,
                              float* dx, const Pool2dShape& s) {
  check(s, "cuda::max_pool2d_relu_backward");
  launch_backward<true>(device, dy, y, arg, dx, s);
}

}  // namespace engine::kernels::cuda
