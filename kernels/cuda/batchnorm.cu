// kernels/cuda/batchnorm.cu: 2-d batch normalisation around kernels/batchnorm.h.
// Train forward and backward: one block per channel; the channel's N*HW values are summed in
// double, each thread over a fixed stride, then by block_sum's fixed tree (deterministic), in two
// passes like the CPU (mean, then the sum of squared deviations). Eval: elementwise.
#include "core/error.h"
#include "kernels/batchnorm.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"

namespace engine::kernels::cuda {
namespace {

__global__ void __launch_bounds__(kThreads)
    bn_train_forward_kernel(const float* x, const float* gamma, const float* beta, float* y,
                            float* save_mean, float* save_invstd, float* running_mean,
                            float* running_var, BatchNormShape s, float momentum, float eps) {
  __shared__ double scratch[kThreads];
  const int64_t c = blockIdx.x, m = s.count();
  double part = 0.0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads)
    part += static_cast<double>(x[channel_index(c, j, s.c, s.hw)]);
  const double mean = block_sum(part, scratch) / static_cast<double>(m);
  part = 0.0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const double d = static_cast<double>(x[channel_index(c, j, s.c, s.hw)]) - mean;
    part += d * d;
  }
  const double var_sum = block_sum(part, scratch);
  const double invstd = bn_invstd(var_sum / static_cast<double>(m), static_cast<double>(eps));
  const float mean_f = static_cast<float>(mean), invstd_f = static_cast<float>(invstd);
  if (threadIdx.x == 0) {
    save_mean[c] = mean_f;
    save_invstd[c] = invstd_f;
    if (running_mean)
      running_mean[c] = static_cast<float>(bn_running_update(static_cast<double>(running_mean[c]),
                                                             mean, static_cast<double>(momentum)));
    if (running_var)
      running_var[c] = static_cast<float>(bn_running_update(static_cast<double>(running_var[c]),
                                                            bn_unbiased_var(var_sum, m),
                                                            static_cast<double>(momentum)));
  }
  const BnAffine a = bn_affine(mean_f, invstd_f, gamma ? gamma[c] : 1.f, beta ? beta[c] : 0.f);
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t idx = channel_index(c, j, s.c, s.hw);
    y[idx] = bn_apply(x[idx], a);
  }
}

__global__ void bn_eval_forward_kernel(const float* x, const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var,
                                       float* y, BatchNormShape s, float eps) {
  for (ENGINE_GRID_LOOP(i, s.n * s.c * s.hw)) {
    const int64_t c = (i / s.hw) % s.c;
    const float invstd = static_cast<float>(
        bn_invstd(static_cast<double>(running_var[c]), static_cast<double>(eps)));
    y[i] = bn_apply(
        x[i], bn_affine(running_mean[c], invstd, gamma ? gamma[c] : 1.f, beta ? beta[c] : 0.f));
  }
}

__global__ void __launch_bounds__(kThreads)
    bn_backward_kernel(const float* dy, const float* x, const float* gamma, const float* save_mean,
                       const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                       BatchNormShape s) {
  __shared__ double sa[kThreads], sb[kThreads];
  const int64_t c = blockIdx.x, m = s.count();
  const float mean = save_mean[c], invstd = save_invstd[c], w = gamma ? gamma[c] : 1.f;
  double sum_dy = 0.0, dotp = 0.0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t idx = channel_index(c, j, s.c, s.hw);
    const double g = static_cast<double>(dy[idx]);
    sum_dy += g;
    dotp += (static_cast<double>(x[idx]) - static_cast<double>(mean)) * g;
  }
  block_sum2(sum_dy, dotp, sa, sb);
  if (threadIdx.x == 0) {
    if (dgamma) dgamma[c] = static_cast<float>(dotp * static_cast<double>(invstd));
    if (dbeta) dbeta[c] = static_cast<float>(sum_dy);
  }
  if (!dx) return;
  const float grad_mean = static_cast<float>(sum_dy / static_cast<double>(m));
  const float proj = static_cast<float>(dotp * static_cast<double>(invstd) *
                                        static_cast<double>(invstd) / static_cast<double>(m));
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t idx = channel_index(c, j, s.c, s.hw);
    dx[idx] = bn_backward_dx(dy[idx], x[idx], mean, invstd, w, grad_mean, proj);
  }
}

void check(const BatchNormShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.c > 0 && s.hw > 0, what, ": bad shape (", s.n, ", ", s.c, ", ", s.hw,
               ")");
  ENGINE_CHECK(s.c <= INT32_MAX, what, ": ", s.c, " channels is over the grid limit");
}

}  // namespace

void batch_norm_train_forward(int device, const float* x, const float* gamma, const float* beta,
                              float* y, float* save_mean, float* save_invstd, float* running_mean,
                              float* running_var, const BatchNormShape& s, float momentum,
                              float eps) {
  check(s, "cuda::batch_norm_train_forward");
  ENGINE_CHECK(s.count() > 1,
               "cuda::batch_norm_train_forward: expected more than 1 value per channel, got ",
               "input (", s.n, ", ", s.c, ", ", s.hw, ")");
  ::engine::cuda::DeviceGuard guard(device);
  bn_train_forward_kernel<<<static_cast<unsigned>(s.c), kThreads, 0,
                            ::engine::cuda::compute_stream(device)>>>(
      x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var, s, momentum, eps);
  CUDA_CHECK_LAUNCH();
}

void batch_norm_eval_forward(int device, const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y,
                             const BatchNormShape& s, float eps) {
  check(s, "cuda::batch_norm_eval_forward");
  const int64_t count = s.n * s.c * s.hw;
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  bn_eval_forward_kernel<<<blocks_for(count), kThreads, 0,
                           ::engine::cuda::compute_stream(device)>>>(x, gamma, beta, running_mean,
                                                                     running_var, y, s, eps);
  CUDA_CHECK_LAUNCH();
}

void batch_norm_backward(int device, const float* dy, const float* x, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta, const BatchNormShape& s) {
  check(s, "cuda::batch_norm_backward");
  ::engine::cuda::DeviceGuard guard(device);
  bn_backward_kernel<<<static_cast<unsigned>(s.c), kThreads, 0,
                       ::engine::cuda::compute_stream(device)>>>(dy, x, gamma, save_mean,
                                                                 save_invstd, dx, dgamma, dbeta, s);
  CUDA_CHECK_LAUNCH();
}

// One thread: queued on the stream (and captured in a CUDA graph), so the host never reads it.
__global__ void count_batch_kernel(int64_t* n) {
  n[0] += 1;
}

void count_batch(int device, int64_t* n) {
  ::engine::cuda::DeviceGuard guard(device);
  count_batch_kernel<<<1, 1, 0, ::engine::cuda::compute_stream(device)>>>(n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace engine::kernels::cuda
