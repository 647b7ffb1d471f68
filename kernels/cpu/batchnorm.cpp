// kernels/cpu/batchnorm.cpp: batch norm loops around kernels/batchnorm.h, parallel over
// channels; each channel's sums run in a fixed order (n, then position) in double lanes.
#include "kernels/cpu/batchnorm.h"

#include <immintrin.h>

#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {

constexpr int kL = 8;  // double lanes of the per-plane sums

// Sum over one plane of f(i), in kSumL lanes combined in a fixed order: four vectors of double
// lanes, so that the adds of consecutive vectors do not wait on each other.
constexpr int kSumL = 32;
template <class F>
double plane_sum(int64_t count, F f) {
  double acc[kSumL] = {};
  int64_t i = 0;
  for (; i + kSumL <= count; i += kSumL)
    for (int l = 0; l < kSumL; ++l) acc[l] += f(i + l);
  for (int l = 0; i + l < count; ++l) acc[l] += f(i + l);
  double total = 0.0;
  for (int l = 0; l < kSumL; ++l) total += acc[l];
  return total;
}

void check(const BatchNormShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.c > 0 && s.hw > 0, what, ": bad shape (", s.n, ", ", s.c, ", ", s.hw,
               ")");
}

void check_train(const BatchNormShape& s, const char* what) {
  check(s, what);
  ENGINE_CHECK(s.count() > 1, what, ": expected more than 1 value per channel, got input (", s.n,
               ", ", s.c, ", ", s.hw, ")");
}

// Planes of channel c: x + (n*C + c)*HW.
template <class F>
void for_planes(const BatchNormShape& s, int64_t c, F f) {
  for (int64_t n = 0; n < s.n; ++n) f((n * s.c + c) * s.hw);
}

void affine(const float* x, float* y, const BatchNormShape& s, int64_t c, BnAffine a) {
  for_planes(s, c, [&](int64_t off) {
    for (int64_t i = 0; i < s.hw; ++i) y[off + i] = bn_apply(x[off + i], a);
  });
}

// Channel c's sum(dy) and sum((x - mean) * dy), in double and in a fixed order: what the
// gradients of gamma and beta are, and what the training-mode input gradient needs. Both sums in
// one pass over each plane, each in plane_sum's lanes and order (AVX-512: 8 double lanes).
struct DySums {
  double sum_dy = 0, dotp = 0;
};
// One plane's two sums, lanes l = i % kL as plane_sum; acc[0] += dy, acc[1] += (x - mean) * dy.
void plane_dy_sums(const float* dy, const float* x, double mean, int64_t count, double acc[2][kL]) {
  int64_t i = 0;
#if defined(__AVX512F__)
  static_assert(kL == 8);
  __m512d a = _mm512_loadu_pd(acc[0]), b = _mm512_loadu_pd(acc[1]);
  const __m512d m = _mm512_set1_pd(mean);
  const __mmask8 all = 0xFF;  // maskz form: GCC 12 warns on the plain one's undefined pass-through
  for (; i + kL <= count; i += kL) {
    const __m512d d = _mm512_maskz_cvtps_pd(all, _mm256_loadu_ps(dy + i));
    a = _mm512_add_pd(a, d);
    b = _mm512_add_pd(
        b, _mm512_mul_pd(_mm512_sub_pd(_mm512_maskz_cvtps_pd(all, _mm256_loadu_ps(x + i)), m), d));
  }
  _mm512_storeu_pd(acc[0], a);
  _mm512_storeu_pd(acc[1], b);
#endif
  for (; i + kL <= count; i += kL)
    for (int l = 0; l < kL; ++l) {
      acc[0][l] += double(dy[i + l]);
      acc[1][l] += (double(x[i + l]) - mean) * double(dy[i + l]);
    }
  for (int l = 0; i + l < count; ++l) {
    acc[0][l] += double(dy[i + l]);
    acc[1][l] += (double(x[i + l]) - mean) * double(dy[i + l]);
  }
}

DySums dy_sums(const float* dy, const float* x, float mean, const BatchNormShape& s, int64_t c) {
  DySums r;
  for_planes(s, c, [&](int64_t off) {
    double acc[2][kL] = {};
    plane_dy_sums(dy + off, x + off, double(mean), s.hw, acc);
    double sum_dy = 0.0, dotp = 0.0;
    for (int l = 0; l < kL; ++l) {
      sum_dy += acc[0][l];
      dotp += acc[1][l];
    }
    r.sum_dy += sum_dy;
    r.dotp += dotp;
  });
  return r;
}

// Channel c's batch mean and invstd (biased variance), saved, and its running update: two passes
// (sum, then squared deviations), each in plane_sum's order.
void channel_stats(const float* x, float* save_mean, float* save_invstd, float* running_mean,
                   float* running_var, const BatchNormShape& s, int64_t c, float momentum,
                   float eps) {
  const int64_t m = s.count();
  double sum = 0.0;
  for_planes(s, c, [&](int64_t off) {
    sum += plane_sum(s.hw, [&](int64_t i) { return double(x[off + i]); });
  });
  const double mean = sum / double(m);
  double var_sum = 0.0;
  for_planes(s, c, [&](int64_t off) {
    var_sum += plane_sum(s.hw, [&](int64_t i) {
      double d = double(x[off + i]) - mean;
      return d * d;
    });
  });
  const double invstd = bn_invstd(var_sum / double(m), double(eps));
  save_mean[c] = static_cast<float>(mean);
  save_invstd[c] = static_cast<float>(invstd);
  if (running_mean)
    running_mean[c] =
        static_cast<float>(bn_running_update(double(running_mean[c]), mean, double(momentum)));
  if (running_var)
    running_var[c] = static_cast<float>(
        bn_running_update(double(running_var[c]), bn_unbiased_var(var_sum, m), double(momentum)));
}

}  // namespace

void batch_norm_train_stats(const float* x, float* save_mean, float* save_invstd,
                            float* running_mean, float* running_var, const BatchNormShape& s,
                            float momentum, float eps) {
  check_train(s, "batch_norm_train_stats");
  parallel_for(s.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      channel_stats(x, save_mean, save_invstd, running_mean, running_var, s, c, momentum, eps);
  });
}

void batch_norm_train_forward(const float* x, const float* gamma, const float* beta, float* y,
                              float* save_mean, float* save_invstd, float* running_mean,
                              float* running_var, const BatchNormShape& s, float momentum,
                              float eps) {
  check_train(s, "batch_norm_train_forward");
  parallel_for(s.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      channel_stats(x, save_mean, save_invstd, running_mean, running_var, s, c, momentum, eps);
      affine(x, y, s, c,
             bn_affine(save_mean[c], save_invstd[c], gamma ? gamma[c] : 1.f, beta ? beta[c] : 0.f));
    }
  });
}

void batch_norm_eval_forward(const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y,
                             const BatchNormShape& s, float eps) {
  check(s, "batch_norm_eval_forward");
  parallel_for(s.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const float invstd = static_cast<float>(bn_invstd(double(running_var[c]), double(eps)));
      affine(x, y, s, c,
             bn_affine(running_mean[c], invstd, gamma ? gamma[c] : 1.f, beta ? beta[c] : 0.f));
    }
  });
}

void batch_norm_backward(const float* dy, const float* x, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta, const BatchNormShape& s) {
  check(s, "batch_norm_backward");
  const int64_t m = s.count();
  parallel_for(s.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const float mean = save_mean[c], invstd = save_invstd[c], w = gamma ? gamma[c] : 1.f;
      const auto [sum_dy, dotp] = dy_sums(dy, x, mean, s, c);
      if (dgamma) dgamma[c] = static_cast<float>(dotp * double(invstd));
      if (dbeta) dbeta[c] = static_cast<float>(sum_dy);
      if (!dx) continue;
      const float grad_mean = static_cast<float>(sum_dy / double(m));
      const float proj = static_cast<float>(dotp * double(invstd) * double(invstd) / double(m));
      for_planes(s, c, [&](int64_t off) {
        for (int64_t i = 0; i < s.hw; ++i)
          dx[off + i] = bn_backward_dx(dy[off + i], x[off + i], mean, invstd, w, grad_mean, proj);
      });
    }
  });
}

void batch_norm_eval_backward(const float* dy, const float* x, const float* gamma,
                              const float* running_mean, const float* running_var, float* dx,
                              float* dgamma, float* dbeta, const BatchNormShape& s, float eps) {
  check(s, "batch_norm_eval_backward");
  parallel_for(s.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const float mean = running_mean[c], w = gamma ? gamma[c] : 1.f;
      const float invstd = static_cast<float>(bn_invstd(double(running_var[c]), double(eps)));
      if (dgamma || dbeta) {
        const auto [sum_dy, dotp] = dy_sums(dy, x, mean, s, c);
        if (dgamma) dgamma[c] = static_cast<float>(dotp * double(invstd));
        if (dbeta) dbeta[c] = static_cast<float>(sum_dy);
      }
      if (!dx) continue;
      const float scale = invstd * w;
      for_planes(s, c, [&](int64_t off) {
        for (int64_t i = 0; i < s.hw; ++i) dx[off + i] = dy[off + i] * scale;
      });
    }
  });
}

void count_batch(int64_t* n) {
  n[0] += 1;
}

}  // namespace engine::kernels::cpu
