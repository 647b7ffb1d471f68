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

// dst[i] = src[i] * scale if element i is kept, else 0.
void apply(const float* src, float* dst, int64_t count, float p, uint64_t seed, uint64_t offset) {
  const float scale = dropout_scale(p);
  parallel_for((count + 3) / 4, kGrain / 4, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      bool keep[4];
      dropout_keep4(seed, offset, static_cast<uint64_t>(g), p, keep);
      for (int64_t j = 0; j < 4 && 4 * g + j < count; ++j)
        dst[4 * g + j] = dropout_apply(src[4 * g + j], keep[j], scale);
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
