// kernels/cpu/optim.cpp: the optimizers' element loops.
#include "kernels/cpu/optim.h"

#include "core/thread_pool.h"

namespace engine::kernels::cpu {

constexpr int64_t kGrain = 1 << 14;

void sgd_step(float* p, const float* g, float* buf, int64_t count, const SgdConfig& c,
              bool first) {
  const SgdCoeffs k = sgd_coeffs(c);
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    float unused = 0;
    for (int64_t i = b; i < e; ++i) sgd_update(p[i], g[i], buf ? buf[i] : unused, k, first);
  });
}

void adam_step(float* p, const float* g, float* m, float* v, int64_t count, const AdamConfig& c,
               int64_t step) {
  const AdamCoeffs k = adam_coeffs(c, step);
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) adam_update(p[i], g[i], m[i], v[i], k);
  });
}

}  // namespace engine::kernels::cpu
