// kernels/cpu/optim.cpp: optimizer loops around kernels/optim.h.
#include "kernels/cpu/optim.h"

#include "core/error.h"
#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {
constexpr int64_t kGrain = 1 << 15;
}

void sgd_step(float* param, const float* grad, float* buf, int64_t count, const SgdConfig& c,
              bool first) {
  ENGINE_CHECK(c.momentum == 0.0 || buf, "sgd_step: momentum ", c.momentum,
               " needs a momentum buffer");
  ENGINE_CHECK(!c.nesterov || (c.momentum > 0.0 && c.dampening == 0.0),
               "sgd_step: nesterov momentum requires a momentum and zero dampening");
  const SgdCoeffs k = sgd_coeffs(c);
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    float unused = 0.f;
    for (int64_t i = b; i < e; ++i) sgd_update(param[i], grad[i], buf ? buf[i] : unused, k, first);
  });
}

void adam_step(float* param, const float* grad, float* m, float* v, int64_t count,
               const AdamConfig& c, int64_t step) {
  ENGINE_CHECK(step >= 1, "adam_step: step counts from 1, got ", step);
  const AdamCoeffs k = adam_coeffs(c, step);
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) adam_update(param[i], grad[i], m[i], v[i], k);
  });
}

}  // namespace engine::kernels::cpu
