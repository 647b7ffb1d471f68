// kernels/cpu/dropout.cpp: dropout loops around kernels/dropout.h. Elements go in groups of 4,
// one Philox call per group (dropout_keep4), exactly the draws dropout_keep would make; with
// AVX-512, 16 groups at once in vector registers (philox16).
#include "kernels/cpu/dropout.h"

#include <immintrin.h>

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // a multiple of 4: tasks start on a Philox group

void check_p(float p, const char* what) {
  ENGINE_CHECK(p >= 0.f && p <= 1.f, what, ": p must be in [0, 1], got ", p);
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__BMI2__)
// The high 32 bits of the 32x32->64 products a * m, lane by lane (even and odd lanes apart).
// maskz forms with all 8 lanes on: GCC 12 warns on the plain ones' undefined pass-through.
inline __m512i mulhi_epu32(__m512i a, __m512i m) {
  const __mmask8 all = 0xFF;
  const __m512i even = _mm512_maskz_srli_epi64(all, _mm512_maskz_mul_epu32(all, a, m), 32);
  const __m512i odd = _mm512_maskz_mul_epu32(all, _mm512_maskz_srli_epi64(all, a, 32), m);
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

// philox4x32 of the 16 counters (first_ctr + l, 0), l = 0..15: word j of lane l in w[j].
void philox16(uint64_t seed, uint64_t first_ctr, __m512i w[4]) {
  alignas(64) uint32_t lo[16], hi[16];
  for (int l = 0; l < 16; ++l) {
    const uint64_t ctr = first_ctr + static_cast<uint64_t>(l);
    lo[l] = static_cast<uint32_t>(ctr);
    hi[l] = static_cast<uint32_t>(ctr >> 32);
  }
  __m512i c0 = _mm512_load_si512(lo), c1 = _mm512_load_si512(hi);
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(mulhi_epu32(c2, m1), c1),
                                        _mm512_set1_epi32(static_cast<int>(k0)));
    const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(mulhi_epu32(c0, m0), c3),
                                        _mm512_set1_epi32(static_cast<int>(k1)));
    c1 = _mm512_mullo_epi32(c2, m1);
    c3 = _mm512_mullo_epi32(c0, m0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  w[0] = c0;
  w[1] = c1;
  w[2] = c2;
  w[3] = c3;
}

// Keep bits of the 64 elements drawn by philox16 (element 4l + j: word j of lane l), in element
// order: uint_to_unit_float(word) >= p, with the same exact float arithmetic.
uint64_t keep_bits64(uint64_t seed, uint64_t first_ctr, float p) {
  __m512i w[4];
  philox16(seed, first_ctr, w);
  const __m512 unit = _mm512_set1_ps(1.0f / 16777216.0f), vp = _mm512_set1_ps(p);
  uint64_t bits = 0;
  for (int j = 0; j < 4; ++j) {
    const __mmask16 all = 0xFFFF;  // maskz forms: see mulhi_epu32
    const __m512 u =
        _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(all, _mm512_maskz_srli_epi32(all, w[j], 8)), unit);
    const uint64_t k = _mm512_cmp_ps_mask(u, vp, _CMP_GE_OQ);
    bits |= _pdep_u64(k, 0x1111111111111111ull << j);
  }
  return bits;
}

// apply() for 64 elements at a time (the same counters: block b of 16 groups).
void apply_block64(const float* src, float* dst, uint8_t* mask, int64_t count, float p, float scale,
                   uint64_t seed, uint64_t offset, int64_t b) {
  const int64_t first = b * 64, n = std::min<int64_t>(64, count - first);
  const uint64_t live = n == 64 ? ~0ull : (1ull << n) - 1;
  const uint64_t keep = keep_bits64(seed, offset + static_cast<uint64_t>(b * 16), p) & live;
  const __m512 vs = _mm512_set1_ps(scale);
  for (int q = 0; q < 4 && 16 * q < n; ++q) {
    const __mmask16 in = static_cast<__mmask16>(live >> (16 * q));
    const __mmask16 k = static_cast<__mmask16>(keep >> (16 * q));
    const __m512 x = _mm512_maskz_loadu_ps(in, src + first + 16 * q);
    _mm512_mask_storeu_ps(dst + first + 16 * q, in, _mm512_maskz_mul_ps(k, x, vs));
  }
  if (mask) _mm512_mask_storeu_epi8(mask + first, live, _mm512_maskz_set1_epi8(keep, 1));
}
#define ENGINE_DROPOUT_AVX512 1
#endif

// Philox4x32-10 for kLanes consecutive counters (offset + g0 + l, 0) at once: the same words as
// philox4x32, written lane-wise so that the compiler vectorises the 32x32->64 multiplies.
constexpr int kLanes = 16;
#ifndef ENGINE_DROPOUT_AVX512
void philox_lanes(uint64_t seed, uint64_t first_ctr, uint32_t out[4][kLanes]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    uint64_t ctr = first_ctr + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(ctr);
    c1[l] = static_cast<uint32_t>(ctr >> 32);
    c2[l] = 0;
    c3[l] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    for (int l = 0; l < kLanes; ++l) {
      uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0[l];
      uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2[l];
      uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
      uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = static_cast<uint32_t>(p1);
      c3[l] = static_cast<uint32_t>(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int l = 0; l < kLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}
#endif

// dst[i] = src[i] * scale if element i is kept, else 0; mask[i] = kept (when mask is not null).
// Group g (elements 4g..4g+3) uses the counter offset + g, as dropout_keep4; kLanes groups are
// drawn together.
void apply(const float* src, float* dst, uint8_t* mask, int64_t count, float p, uint64_t seed,
           uint64_t offset) {
  const float scale = dropout_scale(p);
  const int64_t groups = (count + 3) / 4, blocks = (groups + kLanes - 1) / kLanes;
  parallel_for(blocks, kGrain / (4 * kLanes), [&](int64_t b0, int64_t b1) {
#ifdef ENGINE_DROPOUT_AVX512
    for (int64_t b = b0; b < b1; ++b)
      apply_block64(src, dst, mask, count, p, scale, seed, offset, b);
#else
    uint32_t r[4][kLanes];
    float u[4 * kLanes];  // the block's uniforms in element order: u[4l + j] = word j of lane l
    for (int64_t b = b0; b < b1; ++b) {
      philox_lanes(seed, offset + static_cast<uint64_t>(b * kLanes), r);
      for (int l = 0; l < kLanes; ++l)
        for (int j = 0; j < 4; ++j) u[4 * l + j] = uint_to_unit_float(r[j][l]);
      const int64_t first = b * kLanes * 4, n = std::min<int64_t>(4 * kLanes, count - first);
      for (int64_t i = 0; i < n; ++i) {
        dst[first + i] = dropout_apply(src[first + i], u[i] >= p, scale);
        if (mask) mask[first + i] = u[i] >= p ? 1 : 0;
      }
    }
#endif
  });
}

// apply() for the elements [first, first + count) of the stream: the up to 3 before the next
// group of 4 drawn one by one (dropout_keep), the rest by apply() from that group's counter.
void apply_at(const float* src, float* dst, uint8_t* mask, int64_t count, float p, uint64_t seed,
              uint64_t offset, uint64_t first) {
  const int64_t head = std::min<int64_t>(count, static_cast<int64_t>((4 - first % 4) % 4));
  const float scale = dropout_scale(p);
  for (int64_t i = 0; i < head; ++i) {
    const bool keep = dropout_keep(seed, offset, first + static_cast<uint64_t>(i), p);
    dst[i] = dropout_apply(src[i], keep, scale);
    if (mask) mask[i] = keep ? 1 : 0;
  }
  apply(src + head, dst + head, mask ? mask + head : nullptr, count - head, p, seed,
        offset + (first + static_cast<uint64_t>(head)) / 4);
}

// Plane q of the call keeps dropout_keep(seed, offset, first + q, p).
void apply2d(const float* src, float* dst, int64_t planes, int64_t plane_size, float p,
             uint64_t seed, uint64_t offset, uint64_t first) {
  const float scale = dropout_scale(p);
  parallel_for(planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, plane_size)),
               [&](int64_t q0, int64_t q1) {
                 for (int64_t q = q0; q < q1; ++q) {
                   const bool keep =
                       dropout_keep(seed, offset, first + static_cast<uint64_t>(q), p);
                   const float* s = src + q * plane_size;
                   float* d = dst + q * plane_size;
                   for (int64_t i = 0; i < plane_size; ++i) d[i] = dropout_apply(s[i], keep, scale);
                 }
               });
}

}  // namespace

void dropout_forward(const float* x, float* y, int64_t count, float p, uint64_t seed,
                     uint64_t offset) {
  check_p(p, "dropout_forward");
  apply(x, y, nullptr, count, p, seed, offset);
}

void dropout_backward(const float* dy, float* dx, int64_t count, float p, uint64_t seed,
                      uint64_t offset) {
  check_p(p, "dropout_backward");
  apply(dy, dx, nullptr, count, p, seed, offset);
}

void dropout_forward_mask(const float* x, float* y, uint8_t* mask, int64_t count, float p,
                          uint64_t seed, uint64_t offset) {
  check_p(p, "dropout_forward_mask");
  ENGINE_CHECK(mask || count == 0, "dropout_forward_mask: mask is null");
  apply(x, y, mask, count, p, seed, offset);
}

void dropout_backward_mask(const float* dy, const uint8_t* mask, float* dx, int64_t count,
                           float p) {
  check_p(p, "dropout_backward_mask");
  const float scale = dropout_scale(p);
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = dropout_apply(dy[i], mask[i] != 0, scale);
  });
}

void dropout2d_forward(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                       uint64_t seed, uint64_t offset) {
  check_p(p, "dropout2d_forward");
  apply2d(x, y, planes, plane_size, p, seed, offset, 0);
}

void dropout2d_backward(const float* dy, float* dx, int64_t planes, int64_t plane_size, float p,
                        uint64_t seed, uint64_t offset) {
  check_p(p, "dropout2d_backward");
  apply2d(dy, dx, planes, plane_size, p, seed, offset, 0);
}

void dropout_forward_at(const float* x, float* y, int64_t count, float p, uint64_t seed,
                        uint64_t offset, uint64_t first) {
  check_p(p, "dropout_forward_at");
  apply_at(x, y, nullptr, count, p, seed, offset, first);
}

void dropout_backward_at(const float* dy, float* dx, int64_t count, float p, uint64_t seed,
                         uint64_t offset, uint64_t first) {
  check_p(p, "dropout_backward_at");
  apply_at(dy, dx, nullptr, count, p, seed, offset, first);
}

void dropout_forward_mask_at(const float* x, float* y, uint8_t* mask, int64_t count, float p,
                             uint64_t seed, uint64_t offset, uint64_t first) {
  check_p(p, "dropout_forward_mask_at");
  ENGINE_CHECK(mask || count == 0, "dropout_forward_mask_at: mask is null");
  apply_at(x, y, mask, count, p, seed, offset, first);
}

void dropout2d_forward_at(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                          uint64_t seed, uint64_t offset, uint64_t first_plane) {
  check_p(p, "dropout2d_forward_at");
  apply2d(x, y, planes, plane_size, p, seed, offset, first_plane);
}

void dropout2d_backward_at(const float* dy, float* dx, int64_t planes, int64_t plane_size, float p,
                           uint64_t seed, uint64_t offset, uint64_t first_plane) {
  check_p(p, "dropout2d_backward_at");
  apply2d(dy, dx, planes, plane_size, p, seed, offset, first_plane);
}

void dropout_mask(uint8_t* mask, int64_t count, float p, uint64_t seed, uint64_t offset) {
  check_p(p, "dropout_mask");
  for (int64_t i = 0; i < count; ++i)
    mask[i] = dropout_keep(seed, offset, static_cast<uint64_t>(i), p) ? 1 : 0;
}

}  // namespace engine::kernels::cpu
