// kernels/cpu/softmax.cpp: row loops around kernels/softmax.h. Rows are independent and each
// row's sums run in order, so results do not depend on the thread count.
#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {

int64_t row_grain(int64_t c) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, c));
}

void check_dims(int64_t n, int64_t c, const char* what) {
  ENGINE_CHECK(n >= 0 && c > 0, what, ": bad shape (", n, ", ", c, ")");
}

}  // namespace

void log_softmax_forward(const float* x, float* y, int64_t n, int64_t c) {
  check_dims(n, c, "log_softmax_forward");
  parallel_for(n, row_grain(c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * c;
      float* yr = y + r * c;
      const float m = row_max(xr, c);
      const float lse = row_log_sum_exp(xr, c, m);
      for (int64_t j = 0; j < c; ++j) yr[j] = log_softmax_value(xr[j], m, lse);
    }
  });
}

void log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n, int64_t c) {
  check_dims(n, c, "log_softmax_backward");
  parallel_for(n, row_grain(c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* dyr = dy + r * c;
      const float* yr = y + r * c;
      double sum = 0.0;
      for (int64_t j = 0; j < c; ++j) sum += dyr[j];
      const float s = static_cast<float>(sum);
      float* dxr = dx + r * c;
      for (int64_t j = 0; j < c; ++j) dxr[j] = log_softmax_grad(dyr[j], yr[j], s);
    }
  });
}

void check_targets(const int64_t* target, int64_t n, int64_t c, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    ENGINE_CHECK(class_index_valid(target[i], c), what, ": target[", i, "] = ", target[i],
                 " is outside [0, ", c, ")");
}

void nll_loss_forward(const float* logp, const int64_t* target, float* loss, int64_t n, int64_t c) {
  check_dims(n, c, "nll_loss_forward");
  check_targets(target, n, c, "nll_loss_forward");
  if (n == 0) {
    *loss = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum -= logp[i * c + target[i]];
  *loss = static_cast<float>(sum / double(n));
}

void nll_loss_per_sample(const float* logp, const int64_t* target, float* loss, int64_t n,
                         int64_t c) {
  check_dims(n, c, "nll_loss_per_sample");
  check_targets(target, n, c, "nll_loss_per_sample");
  for (int64_t i = 0; i < n; ++i) loss[i] = -logp[i * c + target[i]];
}

void nll_loss_backward(const float* dloss, const int64_t* target, float* dlogp, int64_t n,
                       int64_t c) {
  check_dims(n, c, "nll_loss_backward");
  // -(d / n) is -d / n: rounding is symmetric.
  nll_loss_backward_scaled(*dloss / static_cast<float>(n), target, dlogp, n, c);
}

void nll_loss_backward_scaled(float scale, const int64_t* target, float* dlogp, int64_t n,
                              int64_t c) {
  check_dims(n, c, "nll_loss_backward");
  check_targets(target, n, c, "nll_loss_backward");
  std::fill(dlogp, dlogp + n * c, 0.f);
  for (int64_t i = 0; i < n; ++i) dlogp[i * c + target[i]] = -scale;
}

float cross_entropy_forward(const float* x, const int64_t* target, float* logp, int64_t n,
                            int64_t c) {
  check_dims(n, c, "cross_entropy_forward");
  check_targets(target, n, c, "cross_entropy_forward");
  log_softmax_forward(x, logp, n, c);
  float loss;
  nll_loss_forward(logp, target, &loss, n, c);
  return loss;
}

void cross_entropy_backward(float dloss, const float* logp, const int64_t* target, float* dx,
                            int64_t n, int64_t c) {
  check_dims(n, c, "cross_entropy_backward");
  cross_entropy_backward_scaled(dloss / static_cast<float>(n), logp, target, dx, n, c);
}

void cross_entropy_backward_scaled(float scale, const float* logp, const int64_t* target, float* dx,
                                   int64_t n, int64_t c) {
  check_dims(n, c, "cross_entropy_backward");
  check_targets(target, n, c, "cross_entropy_backward");
  parallel_for(n, row_grain(c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < c; ++j)
        dx[r * c + j] = cross_entropy_grad(logp[r * c + j], j == target[r], scale);
  });
}

void argmax_rows(const float* x, int64_t n, int64_t c, int64_t* out) {
  check_dims(n, c, "argmax_rows");
  for (int64_t r = 0; r < n; ++r) out[r] = row_argmax(x + r * c, c);
}

int64_t accuracy_count(const float* x, const int64_t* target, int64_t n, int64_t c) {
  check_dims(n, c, "accuracy_count");
  int64_t hits = 0;
  for (int64_t r = 0; r < n; ++r) hits += row_argmax(x + r * c, c) == target[r] ? 1 : 0;
  return hits;
}

}  // namespace engine::kernels::cpu
