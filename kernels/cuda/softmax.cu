// kernels/cuda/softmax.cu: log-softmax, NLL loss and argmax over rows of (N, C), around
// kernels/softmax.h. One thread per row runs the same row helpers, in the same order, as the CPU
// (the models' rows are 10 classes wide); the loss is one block with block_sum's fixed tree.
#include <math_constants.h>

#include "core/cuda_backend.h"
#include "core/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/softmax.h"

namespace engine::kernels::cuda {
namespace {

__global__ void log_softmax_forward_kernel(const float* x, float* y, int64_t n, int64_t c) {
  for (ENGINE_GRID_LOOP(i, n)) {
    const float* xr = x + i * c;
    const float mx = row_max(xr, c), lse = row_log_sum_exp(xr, c, mx);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = log_softmax_value(xr[j], mx, lse);
  }
}

__global__ void log_softmax_backward_kernel(const float* dy, const float* y, float* dx, int64_t n,
                                            int64_t c) {
  for (ENGINE_GRID_LOOP(i, n)) {
    float sum = 0.f;  // in float, in order, as the CPU
    for (int64_t j = 0; j < c; ++j) sum += dy[i * c + j];
    for (int64_t j = 0; j < c; ++j)
      dx[i * c + j] = log_softmax_grad(dy[i * c + j], y[i * c + j], sum);
  }
}

// One block: loss = mean_i -logp[i, target[i]]. A target outside [0, c) is never read through:
// its row adds NaN, so the loss is NaN (no host read here: the training data's labels are
// checked on the host when the data is opened, and a NaN loss shows at the progress line and to
// the non-finite guard).
__global__ void __launch_bounds__(kThreads)
    nll_loss_forward_kernel(const float* logp, const int64_t* target, float* loss, int64_t n,
                            int64_t c) {
  __shared__ double scratch[kThreads];
  double part = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const int64_t t = target[i];
    part -= class_index_valid(t, c) ? static_cast<double>(logp[i * c + t]) : CUDART_NAN;
  }
  const double sum = block_sum(part, scratch);
  if (threadIdx.x == 0) *loss = n ? static_cast<float>(sum / static_cast<double>(n)) : 0.f;
}

__global__ void nll_loss_backward_kernel(const float* dloss, const int64_t* target, float* dlogp,
                                         int64_t n, int64_t c) {
  const float g = n ? -*dloss / static_cast<float>(n) : 0.f;
  for (ENGINE_GRID_LOOP(i, n * c)) {
    const int64_t row = i / c;
    dlogp[i] = (i - row * c) == target[row] ? g : 0.f;
  }
}

__global__ void argmax_kernel(const float* x, int64_t n, int64_t c, int64_t* out) {
  for (ENGINE_GRID_LOOP(i, n)) out[i] = row_argmax(x + i * c, c);
}

void check(int64_t n, int64_t c, const char* what) {
  ENGINE_CHECK(n >= 0 && c > 0, what, ": bad shape (", n, ", ", c, ")");
}

}  // namespace

void log_softmax_forward(int device, const float* x, float* y, int64_t n, int64_t c) {
  check(n, c, "cuda::log_softmax_forward");
  if (n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  log_softmax_forward_kernel<<<blocks_for(n), kThreads, 0,
                               ::engine::cuda::compute_stream(device)>>>(x, y, n, c);
  CUDA_CHECK_LAUNCH();
}

void log_softmax_backward(int device, const float* dy, const float* y, float* dx, int64_t n,
                          int64_t c) {
  check(n, c, "cuda::log_softmax_backward");
  if (n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  log_softmax_backward_kernel<<<blocks_for(n), kThreads, 0,
                                ::engine::cuda::compute_stream(device)>>>(dy, y, dx, n, c);
  CUDA_CHECK_LAUNCH();
}

void nll_loss_forward(int device, const float* logp, const int64_t* target, float* loss, int64_t n,
                      int64_t c) {
  check(n, c, "cuda::nll_loss_forward");
  ::engine::cuda::DeviceGuard guard(device);
  nll_loss_forward_kernel<<<1, kThreads, 0, ::engine::cuda::compute_stream(device)>>>(logp, target,
                                                                                      loss, n, c);
  CUDA_CHECK_LAUNCH();
}

void nll_loss_backward(int device, const float* dloss, const int64_t* target, float* dlogp,
                       int64_t n, int64_t c) {
  check(n, c, "cuda::nll_loss_backward");
  if (n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  nll_loss_backward_kernel<<<blocks_for(n * c), kThreads, 0,
                             ::engine::cuda::compute_stream(device)>>>(dloss, target, dlogp, n, c);
  CUDA_CHECK_LAUNCH();
}

void argmax_rows(int device, const float* x, int64_t n, int64_t c, int64_t* out) {
  check(n, c, "cuda::argmax_rows");
  if (n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  argmax_kernel<<<blocks_for(n), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(x, n, c,
                                                                                        out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace engine::kernels::cuda
