// kernels/softmax.h: log-softmax, negative log-likelihood and argmax arithmetic over rows of
// (N, C), shared by CPU and CUDA. Row helpers take one row of C values.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

ENGINE_HD float row_max(const float* x, int64_t c) {
  float m = -INFINITY;
  for (int64_t j = 0; j < c; ++j) m = (x[j] > m || x[j] != x[j]) ? x[j] : m;
  return m;
}

// log(sum_j exp(x[j] - max)); the exps are summed in double, in order.
ENGINE_HD float row_log_sum_exp(const float* x, int64_t c, float max) {
  double s = 0.0;
  for (int64_t j = 0; j < c; ++j) s += exp(static_cast<double>(x[j] - max));
  return static_cast<float>(log(s));
}

// y = x - max - log_sum_exp.
ENGINE_HD float log_softmax_value(float x, float max, float log_sum) {
  return x - max - log_sum;
}

// dx = dy - exp(y) * sum_j dy[j], y the log-softmax output.
ENGINE_HD float log_softmax_grad(float dy, float y, float sum_dy) {
  return dy - expf(y) * sum_dy;
}

// Cross entropy through log-softmax: dx = (exp(logp) - [j == target]) * scale, scale = dloss/N.
ENGINE_HD float cross_entropy_grad(float logp, bool is_target, float scale) {
  return (expf(logp) - (is_target ? 1.f : 0.f)) * scale;
}

ENGINE_HD bool class_index_valid(int64_t t, int64_t c) {
  return t >= 0 && t < c;
}

// First index of the row's maximum; a NaN counts as the maximum (torch.argmax).
ENGINE_HD int64_t row_argmax(const float* x, int64_t c) {
  int64_t best = 0;
  for (int64_t j = 1; j < c; ++j) {
    float b = x[best];
    if (b != b) break;
    if (x[j] > b || x[j] != x[j]) best = j;
  }
  return best;
}

}  // namespace engine::kernels
