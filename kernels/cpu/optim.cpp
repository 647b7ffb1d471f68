// kernels/cpu/optim.cpp: optimizer loops around kernels/optim.h. With AVX-512, 16 elements at a
// time (a masked tail) doing the same float operations in the same order as sgd_update and
// adam_update (fmaf is one rounding; _mm512_sqrt_ps and _mm512_div_ps are correctly rounded),
// so the results are the scalar ones bit for bit. (maskz_sqrt with all lanes on: GCC 12 warns on
// the plain form's undefined pass-through.)
#include "kernels/cpu/optim.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {
constexpr int64_t kGrain = 1 << 15;

#if defined(__AVX512F__)
__mmask16 tail(int64_t i, int64_t e) {
  const int64_t n = std::min<int64_t>(16, e - i);
  return static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1);
}

void sgd_range(float* param, const float* grad, float* buf, int64_t b, int64_t e,
               const SgdCoeffs& k, bool first) {
  const __m512 wd = _mm512_set1_ps(k.weight_decay), mom = _mm512_set1_ps(k.momentum);
  const __m512 damp = _mm512_set1_ps(k.one_minus_dampening), lr = _mm512_set1_ps(k.neg_lr);
  for (int64_t i = b; i < e; i += 16) {
    const __mmask16 m = tail(i, e);
    const __m512 p = _mm512_maskz_loadu_ps(m, param + i);
    __m512 d = _mm512_maskz_loadu_ps(m, grad + i);
    if (k.weight_decay != 0.f) d = _mm512_fmadd_ps(p, wd, d);
    if (k.momentum != 0.f) {
      __m512 bv = d;
      if (!first)
        bv = _mm512_fmadd_ps(d, damp, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, buf + i), mom));
      _mm512_mask_storeu_ps(buf + i, m, bv);
      d = k.nesterov ? _mm512_fmadd_ps(bv, mom, d) : bv;
    }
    _mm512_mask_storeu_ps(param + i, m, _mm512_fmadd_ps(d, lr, p));
  }
}

void adam_range(float* param, const float* grad, float* mv, float* vv, int64_t b, int64_t e,
                const AdamCoeffs& k) {
  const __m512 wd = _mm512_set1_ps(k.weight_decay), b1 = _mm512_set1_ps(k.beta1);
  const __m512 omb1 = _mm512_set1_ps(k.one_minus_beta1), b2 = _mm512_set1_ps(k.beta2);
  const __m512 omb2 = _mm512_set1_ps(k.one_minus_beta2), eps = _mm512_set1_ps(k.eps);
  const __m512 step = _mm512_set1_ps(k.neg_step_size);
  const __m512 bc2 = _mm512_set1_ps(k.bias_correction2_sqrt);
  for (int64_t i = b; i < e; i += 16) {
    const __mmask16 msk = tail(i, e);
    const __m512 p = _mm512_maskz_loadu_ps(msk, param + i);
    __m512 g = _mm512_maskz_loadu_ps(msk, grad + i);
    if (k.weight_decay != 0.f) g = _mm512_fmadd_ps(p, wd, g);
    const __m512 m =
        _mm512_fmadd_ps(g, omb1, _mm512_mul_ps(_mm512_maskz_loadu_ps(msk, mv + i), b1));
    const __m512 v = _mm512_fmadd_ps(_mm512_mul_ps(omb2, g), g,
                                     _mm512_mul_ps(_mm512_maskz_loadu_ps(msk, vv + i), b2));
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_maskz_sqrt_ps(0xFFFF, v), bc2), eps);
    _mm512_mask_storeu_ps(mv + i, msk, m);
    _mm512_mask_storeu_ps(vv + i, msk, v);
    _mm512_mask_storeu_ps(param + i, msk,
                          _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(step, m), denom)));
  }
}
#else
void sgd_range(float* param, const float* grad, float* buf, int64_t b, int64_t e,
               const SgdCoeffs& k, bool first) {
  float unused = 0.f;
  for (int64_t i = b; i < e; ++i) sgd_update(param[i], grad[i], buf ? buf[i] : unused, k, first);
}

void adam_range(float* param, const float* grad, float* m, float* v, int64_t b, int64_t e,
                const AdamCoeffs& k) {
  for (int64_t i = b; i < e; ++i) adam_update(param[i], grad[i], m[i], v[i], k);
}
#endif

}  // namespace

void sgd_step(float* param, const float* grad, float* buf, int64_t count, const SgdConfig& c,
              bool first) {
  ENGINE_CHECK(c.momentum == 0.0 || buf, "sgd_step: momentum ", c.momentum,
               " needs a momentum buffer");
  ENGINE_CHECK(!c.nesterov || (c.momentum > 0.0 && c.dampening == 0.0),
               "sgd_step: nesterov momentum requires a momentum and zero dampening");
  const SgdCoeffs k = sgd_coeffs(c);
  parallel_for(count, kGrain,
               [&](int64_t b, int64_t e) { sgd_range(param, grad, buf, b, e, k, first); });
}

void adam_step(float* param, const float* grad, float* m, float* v, int64_t count,
               const AdamConfig& c, int64_t step) {
  ENGINE_CHECK(step >= 1, "adam_step: step counts from 1, got ", step);
  const AdamCoeffs k = adam_coeffs(c, step);
  parallel_for(count, kGrain,
               [&](int64_t b, int64_t e) { adam_range(param, grad, m, v, b, e, k); });
}

namespace {

// Calls fn(tensor index, begin, end) for the part of every tensor that elements [b, e) of the
// tensors laid end to end cover (start: each tensor's first element there, n + 1 entries).
template <class Fn>
void for_parts(const std::vector<int64_t>& start, int64_t b, int64_t e, Fn fn) {
  const auto first = std::upper_bound(start.begin(), start.end(), b) - start.begin() - 1;
  for (int64_t k = first; k + 1 < static_cast<int64_t>(start.size()) && start[k] < e; ++k) {
    const int64_t lo = std::max(b, start[k]) - start[k], hi = std::min(e, start[k + 1]) - start[k];
    if (lo < hi) fn(k, lo, hi);
  }
}

std::vector<int64_t> starts(const OptimTensor* ts, int64_t n) {
  std::vector<int64_t> start(static_cast<size_t>(n) + 1, 0);
  for (int64_t k = 0; k < n; ++k) {
    ENGINE_CHECK(ts[k].count >= 0, "optimizer: tensor ", k, " has a negative count");
    start[k + 1] = start[k] + ts[k].count;
  }
  return start;
}

}  // namespace

void sgd_step_multi(const OptimTensor* ts, int64_t n, const SgdConfig& c) {
  ENGINE_CHECK(!c.nesterov || (c.momentum > 0.0 && c.dampening == 0.0),
               "sgd_step: nesterov momentum requires a momentum and zero dampening");
  for (int64_t k = 0; k < n; ++k)
    ENGINE_CHECK(c.momentum == 0.0 || ts[k].buf || ts[k].count == 0, "sgd_step: momentum ",
                 c.momentum, " needs a momentum buffer (tensor ", k, ")");
  const SgdCoeffs co = sgd_coeffs(c);
  const std::vector<int64_t> start = starts(ts, n);
  parallel_for(start.back(), kGrain, [&](int64_t b, int64_t e) {
    for_parts(start, b, e, [&](int64_t k, int64_t lo, int64_t hi) {
      const OptimTensor& t = ts[k];
      sgd_range(t.param, t.grad, c.momentum != 0.0 ? t.buf : nullptr, lo, hi, co, t.first);
    });
  });
}

void adam_step_multi(const OptimTensor* ts, int64_t n, const AdamConfig& c, int64_t step) {
  ENGINE_CHECK(step >= 1, "adam_step: step counts from 1, got ", step);
  const AdamCoeffs co = adam_coeffs(c, step);
  const std::vector<int64_t> start = starts(ts, n);
  parallel_for(start.back(), kGrain, [&](int64_t b, int64_t e) {
    for_parts(start, b, e, [&](int64_t k, int64_t lo, int64_t hi) {
      const OptimTensor& t = ts[k];
      adam_range(t.param, t.grad, t.buf, t.buf2, lo, hi, co);
    });
  });
}

}  // namespace engine::kernels::cpu
