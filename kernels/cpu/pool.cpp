// kernels/cpu/pool.cpp: max pooling (and max pooling fused with relu) loops around kernels/pool.h,
// parallel over (n, c) planes.
#include "kernels/cpu/pool.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/cpu/scratch.h"

namespace engine::kernels::cpu {
namespace {

void check(const Pool2dShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.c > 0 && s.k > 0 && s.stride > 0 && s.h >= s.k && s.w >= s.k, what,
               ": bad shape x (", s.n, ", ", s.c, ", ", s.h, ", ", s.w, ") kernel ", s.k,
               " stride ", s.stride);
  ENGINE_CHECK(s.h * s.w <= INT32_MAX, what, ": plane of ", s.h * s.w,
               " elements does not fit int32 indices");
}

// Grain: planes per task so that a task touches at least ~16K elements.
int64_t grain(const Pool2dShape& s) {
  return std::max<int64_t>(1, 16384 / (s.h * s.w));
}

#if defined(__AVX512F__)
// Lanes 2i of a row pair's 32 inputs, for the even columns; + 1 for the odd ones.
inline __m512i even_lanes() {
  return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}

// Masks of a block of n <= 16 outputs: inputs 0..15 (lo) and 16..31 (hi) of a row, outputs (out).
struct RowMasks {
  __mmask16 lo, hi, out;
  explicit RowMasks(int64_t n)
      : lo(static_cast<__mmask16>(n >= 8 ? 0xFFFF : (1u << (2 * n)) - 1)),
        hi(static_cast<__mmask16>(n > 8 ? (1u << (2 * (n - 8))) - 1 : 0)),
        out(static_cast<__mmask16>((1u << n) - 1)) {}
};

// 16 outputs of one output row at a time: even and odd columns of the two input rows are split
// with permutes, then compared and selected under masks, in max_pool_window's order. With Relu,
// relu of the max (NaN stays NaN, -0 stays -0, as relu()).
template <bool Relu>
void pool_row_2x2_avx512(const float* r0, const float* r1, float* y, int32_t* a, int64_t ow,
                         int32_t base0, int32_t base1) {
  const __m512i even = even_lanes();
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t j = 0; j < ow; j += 16) {
    const RowMasks m(std::min<int64_t>(16, ow - j));
    const float* p0 = r0 + 2 * j;
    const float* p1 = r1 + 2 * j;
    const __m512 a0 = _mm512_maskz_loadu_ps(m.lo, p0), a1 = _mm512_maskz_loadu_ps(m.hi, p0 + 16);
    const __m512 b0 = _mm512_maskz_loadu_ps(m.lo, p1), b1 = _mm512_maskz_loadu_ps(m.hi, p1 + 16);
    const __m512 v[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                         _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)};
    const __m512i col = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(2 * j)), even);
    const __m512i vi[4] = {_mm512_add_epi32(col, _mm512_set1_epi32(base0)),
                           _mm512_add_epi32(col, _mm512_set1_epi32(base0 + 1)),
                           _mm512_add_epi32(col, _mm512_set1_epi32(base1)),
                           _mm512_add_epi32(col, _mm512_set1_epi32(base1 + 1))};
    __m512 best = v[0];
    __m512i bi = vi[0];
    for (int q = 1; q < 4; ++q) {
      // A larger value wins, and so does any NaN (the last one).
      const __mmask16 take =
          _mm512_cmp_ps_mask(v[q], best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v[q], v[q], _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(take, best, v[q]);
      bi = _mm512_mask_blend_epi32(take, bi, vi[q]);
    }
    if constexpr (Relu) {
      const __m512 zero = _mm512_setzero_ps();
      best = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(best, zero, _CMP_LT_OQ), best, zero);
    }
    _mm512_mask_storeu_ps(y + j, m.out, best);
    _mm512_mask_storeu_epi32(a + j, m.out, bi);
  }
}
#endif

// The window's max (with Relu, relu of it) and arg.
template <bool Relu>
float window(const float* xp, int64_t w, int64_t r0, int64_t c0, int64_t k, int32_t* arg) {
  const float m = max_pool_window(xp, w, r0, c0, k, arg);
  return Relu ? relu(m) : m;
}

// The tutorials' 2x2, stride-2 window (same result and NaN rule as max_pool_window).
template <bool Relu>
void pool_plane_2x2(const float* xp, float* yp, int32_t* ap, int64_t w, int64_t oh, int64_t ow) {
  for (int64_t i = 0; i < oh; ++i) {
#if defined(__AVX512F__)
    const float* r0 = xp + 2 * i * w;
    const int32_t base0 = static_cast<int32_t>(2 * i * w), base1 = base0 + static_cast<int32_t>(w);
    pool_row_2x2_avx512<Relu>(r0, r0 + w, yp + i * ow, ap + i * ow, ow, base0, base1);
#else
    for (int64_t j = 0; j < ow; ++j)
      yp[i * ow + j] = window<Relu>(xp, w, 2 * i, 2 * j, 2, &ap[i * ow + j]);
#endif
  }
}

// out = bn_apply(x) element by element (restrict: the loop vectorises with no overlap check).
void affine_plane(const float* __restrict x, float* __restrict out, int64_t count, BnAffine a) {
  for (int64_t i = 0; i < count; ++i) out[i] = bn_apply(x[i], a);
}

// One plane xp (H, W) pooled into yp, ap (OH, OW).
template <bool Relu>
void pool_plane(const float* xp, float* yp, int32_t* ap, const Pool2dShape& s) {
  const int64_t oh = s.oh(), ow = s.ow();
  if (s.k == 2 && s.stride == 2) {
    pool_plane_2x2<Relu>(xp, yp, ap, s.w, oh, ow);
    return;
  }
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j)
      yp[i * ow + j] = window<Relu>(xp, s.w, i * s.stride, j * s.stride, s.k, &ap[i * ow + j]);
}

// With alpha set, each plane of channel c is first mapped to x * alpha[c] + shift[c] in a scratch
// plane (kept in L1), which is then pooled: batch norm's affine folded into the pool.
template <bool Relu>
void pool_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s,
                  const float* alpha = nullptr, const float* shift = nullptr) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh() * s.ow();
  parallel_for(s.planes(), grain(s), [&](int64_t p0, int64_t p1) {
    Scratch<float> mapped(alpha ? in_plane : 0);
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * in_plane;
      if (alpha) {
        affine_plane(xp, mapped.get(), in_plane, {alpha[p % s.c], shift[p % s.c]});
        xp = mapped.get();
      }
      pool_plane<Relu>(xp, y + p * out_plane, arg + p * out_plane, s);
    }
  });
}

// dx = dy (with Relu, relu_grad(dy, y)) scattered to each window's argmax. A zero fill then a
// scatter: in training (dx cold) this measured faster than writing each 2x2 window's four inputs
// in one pass with masked stores.
template <bool Relu>
void pool_backward(const float* dy, const float* y, const int32_t* arg, float* dx,
                   const Pool2dShape& s) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh() * s.ow();
  parallel_for(s.planes(), grain(s), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* dxp = dx + p * in_plane;
      const float* dyp = dy + p * out_plane;
      const int32_t* ap = arg + p * out_plane;
      std::fill(dxp, dxp + in_plane, 0.f);
      if constexpr (Relu) {
        const float* yp = y + p * out_plane;
        // relu_grad(dy, y) by a bit mask: a compiled branch on y > 0 mispredicts (relu's zeros).
        for (int64_t i = 0; i < out_plane; ++i) {
          const uint32_t keep = 0u - static_cast<uint32_t>(yp[i] > 0.f);
          dxp[ap[i]] += std::bit_cast<float>(std::bit_cast<uint32_t>(dyp[i]) & keep);
        }
      } else {
        for (int64_t i = 0; i < out_plane; ++i) dxp[ap[i]] += dyp[i];
      }
    }
  });
}

}  // namespace

void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  check(s, "max_pool2d_forward");
  pool_forward<false>(x, y, arg, s);
}

void max_pool2d_relu_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  check(s, "max_pool2d_relu_forward");
  pool_forward<true>(x, y, arg, s);
}

void max_pool2d_affine_forward(const float* x, const float* alpha, const float* shift, float* y,
                               int32_t* arg, const Pool2dShape& s, bool relu) {
  check(s, "max_pool2d_affine_forward");
  ENGINE_CHECK(alpha && shift, "max_pool2d_affine_forward: alpha and shift are required");
  if (relu)
    pool_forward<true>(x, y, arg, s, alpha, shift);
  else
    pool_forward<false>(x, y, arg, s, alpha, shift);
}

void max_pool2d_planes(const float* x, float* y, int32_t* arg, int64_t planes, const Pool2dShape& s,
                       bool relu) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh() * s.ow();
  for (int64_t p = 0; p < planes; ++p) {
    if (relu)
      pool_plane<true>(x + p * in_plane, y + p * out_plane, arg + p * out_plane, s);
    else
      pool_plane<false>(x + p * in_plane, y + p * out_plane, arg + p * out_plane, s);
  }
}

void max_pool2d_backward(const float* dy, const int32_t* arg, float* dx, const Pool2dShape& s) {
  check(s, "max_pool2d_backward");
  pool_backward<false>(dy, nullptr, arg, dx, s);
}

void max_pool2d_relu_backward(const float* dy, const float* y, const int32_t* arg, float* dx,
                              const Pool2dShape& s) {
  check(s, "max_pool2d_relu_backward");
  pool_backward<true>(dy, y, arg, dx, s);
}

}  // namespace engine::kernels::cpu
