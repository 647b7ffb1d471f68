// kernels/cpu/loss.cpp: row-wise log-softmax, negative log-likelihood and argmax.
#include "kernels/cpu/loss.h"

#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/softmax.h"

namespace engine::kernels::cpu {

void log_softmax_forward(const float* x, float* y, int64_t n, int64_t c) {
  parallel_for(n, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* xr = x + i * c;
      float mx = row_max(xr, c), lse = row_log_sum_exp(xr, c, mx);
      for (int64_t j = 0; j < c; ++j) y[i * c + j] = log_softmax_value(xr[j], mx, lse);
    }
  });
}

void log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n, int64_t c) {
  parallel_for(n, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += dy[i * c + j];
      for (int64_t j = 0; j < c; ++j)
        dx[i * c + j] = log_softmax_grad(dy[i * c + j], y[i * c + j], sum);
    }
  });
}

float nll_loss_forward(const float* logp, const int64_t* target, int64_t n, int64_t c) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    ENGINE_CHECK(class_index_valid(target[i], c), "nll_loss: target ", target[i], " of row ", i,
                 " is outside [0, ", c, ")");
    sum -= logp[i * c + target[i]];
  }
  return n ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
}

void nll_loss_backward(float dloss, const int64_t* target, float* dlogp, int64_t n, int64_t c) {
  const float g = n ? -dloss / static_cast<float>(n) : 0.0f;
  for (int64_t i = 0; i < n * c; ++i) dlogp[i] = 0;
  for (int64_t i = 0; i < n; ++i) dlogp[i * c + target[i]] = g;
}

void argmax_rows(const float* x, int64_t n, int64_t c, int64_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = row_argmax(x + i * c, c);
}

}  // namespace engine::kernels::cpu
