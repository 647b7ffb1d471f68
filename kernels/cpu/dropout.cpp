// kernels/cpu/dropout.cpp: dropout loops around kernels/dropout.h. Elements go in groups of 4,
// one Philox call per group (dropout_keep4), exactly the draws dropout_keep would make.
#include "kernels/cpu/dropout.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // a multiple of 4: tasks start on a Philox group

void check_p(float p, const char* what) {
  ENGINE_CHECK(p >= 0.f && p <= 1.f, what, ": p must be in [0, 1], got ", p);
}

// Philox4x32-10 for kLanes consecutive counters (offset + g0 + l, 0) at once: the same words as
// philox4x32, written lane-wise so that the compiler vectorises the 32x32->64 multiplies.
constexpr int kLanes = 16;
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

// dst[i] = src[i] * scale if element i is kept, else 0. Group g (elements 4g..4g+3) uses the
// counter offset + g, as dropout_keep4; kLanes groups are drawn together.
void apply(const float* src, float* dst, int64_t count, float p, uint64_t seed, uint64_t offset) {
  const float scale = dropout_scale(p);
  const int64_t groups = (count + 3) / 4, blocks = (groups + kLanes - 1) / kLanes;
  parallel_for(blocks, kGrain / (4 * kLanes), [&](int64_t b0, int64_t b1) {
    uint32_t r[4][kLanes];
    float u[4 * kLanes];  // the block's uniforms in element order: u[4l + j] = word j of lane l
    for (int64_t b = b0; b < b1; ++b) {
      philox_lanes(seed, offset + static_cast<uint64_t>(b * kLanes), r);
      for (int l = 0; l < kLanes; ++l)
        for (int j = 0; j < 4; ++j) u[4 * l + j] = uint_to_unit_float(r[j][l]);
      const int64_t first = b * kLanes * 4, n = std::min<int64_t>(4 * kLanes, count - first);
      for (int64_t i = 0; i < n; ++i)
        dst[first + i] = dropout_apply(src[first + i], u[i] >= p, scale);
    }
  });
}

void apply2d(const float* src, float* dst, int64_t planes, int64_t plane_size, float p,
             uint64_t seed, uint64_t offset) {
  const float scale = dropout_scale(p);
  parallel_for(planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, plane_size)),
               [&](int64_t q0, int64_t q1) {
                 for (int64_t q = q0; q < q1; ++q) {
                   const bool keep = dropout_keep(seed, offset, static_cast<uint64_t>(q), p);
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
  apply(x, y, count, p, seed, offset);
}

void dropout_backward(const float* dy, float* dx, int64_t count, float p, uint64_t seed,
                      uint64_t offset) {
  check_p(p, "dropout_backward");
  apply(dy, dx, count, p, seed, offset);
}

void dropout2d_forward(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                       uint64_t seed, uint64_t offset) {
  check_p(p, "dropout2d_forward");
  apply2d(x, y, planes, plane_size, p, seed, offset);
}

void dropout2d_backward(const float* dy, float* dx, int64_t planes, int64_t plane_size, float p,
                        uint64_t seed, uint64_t offset) {
  check_p(p, "dropout2d_backward");
  apply2d(dy, dx, planes, plane_size, p, seed, offset);
}

void dropout_mask(uint8_t* mask, int64_t count, float p, uint64_t seed, uint64_t offset) {
  check_p(p, "dropout_mask");
  for (int64_t i = 0; i < count; ++i)
    mask[i] = dropout_keep(seed, offset, static_cast<uint64_t>(i), p) ? 1 : 0;
}

}  // namespace engine::kernels::cpu
