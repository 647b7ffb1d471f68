// kernels/cpu/batchnorm.cpp: batch normalisation, one channel per task.
#include "kernels/cpu/batchnorm.h"

#include <cmath>

#include "core/thread_pool.h"

namespace engine::kernels::cpu {

// Calls fn(channel, offset of sample n's plane) over the planes of one channel.
template <class Fn>
static void for_planes(const BatchNormShape& s, int64_t ch, Fn fn) {
  for (int64_t n = 0; n < s.n; ++n) fn((n * s.c + ch) * s.hw);
}

void batch_norm_train_forward(const float* x, const float* gamma, const float* beta, float* y,
                              float* mean, float* invstd, float* running_mean,
                              float* running_var, const BatchNormShape& s, float momentum,
                              float eps) {
  const int64_t count = s.count();
  parallel_for(s.c, 1, [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch) {
      double sum = 0;
      for_planes(s, ch, [&](int64_t o) {
        for (int64_t i = 0; i < s.hw; ++i) sum += x[o + i];
      });
      const double m = sum / static_cast<double>(count);
      double var_sum = 0;
      for_planes(s, ch, [&](int64_t o) {
        for (int64_t i = 0; i < s.hw; ++i) {
          double d = x[o + i] - m;
          var_sum += d * d;
        }
      });
      const double biased = var_sum / static_cast<double>(count);
      mean[ch] = static_cast<float>(m);
      invstd[ch] = static_cast<float>(bn_invstd<double>(biased, eps));
      running_mean[ch] = bn_running_update<float>(running_mean[ch], mean[ch], momentum);
      running_var[ch] = bn_running_update<float>(
          running_var[ch], static_cast<float>(bn_unbiased_var<double>(var_sum, count)), momentum);
      BnAffine a = bn_affine(mean[ch], invstd[ch], gamma[ch], beta[ch]);
      for_planes(s, ch, [&](int64_t o) {
        for (int64_t i = 0; i < s.hw; ++i) y[o + i] = bn_apply(x[o + i], a);
      });
    }
  });
}

void batch_norm_eval_forward(const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y,
                             const BatchNormShape& s, float eps) {
  parallel_for(s.c, 1, [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch) {
      float is = bn_invstd<float>(running_var[ch], eps);
      BnAffine a = bn_affine(running_mean[ch], is, gamma[ch], beta[ch]);
      for_planes(s, ch, [&](int64_t o) {
        for (int64_t i = 0; i < s.hw; ++i) y[o + i] = bn_apply(x[o + i], a);
      });
    }
  });
}

void batch_norm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* invstd, float* dx, float* dgamma, float* dbeta,
                         const BatchNormShape& s) {
  const int64_t count = s.count();
  parallel_for(s.c, 1, [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch) {
      const float m = mean[ch], is = invstd[ch];
      double sum_dy = 0, sum_dy_xmu = 0;
      for_planes(s, ch, [&](int64_t o) {
        for (int64_t i = 0; i < s.hw; ++i) {
          sum_dy += dy[o + i];
          sum_dy_xmu += static_cast<double>(dy[o + i]) * (x[o + i] - m);
        }
      });
      dbeta[ch] = static_cast<float>(sum_dy);
      dgamma[ch] = static_cast<float>(sum_dy_xmu * is);
      const float grad_mean = static_cast<float>(sum_dy / static_cast<double>(count));
      const float proj = static_cast<float>(sum_dy_xmu * is * is / static_cast<double>(count));
      for_planes(s, ch, [&](int64_t o) {
        for (int64_t i = 0; i < s.hw; ++i)
          dx[o + i] = bn_backward_dx(dy[o + i], x[o + i], m, is, gamma[ch], grad_mean, proj);
      });
    }
  });
}

}  // namespace engine::kernels::cpu
