// kernels/cpu/activation.cpp: ReLU and dropout loops.
#include "kernels/cpu/activation.h"

#include "core/thread_pool.h"
#include "kernels/activation.h"
#include "kernels/dropout.h"

namespace engine::kernels::cpu {

constexpr int64_t kGrain = 1 << 14;

void relu_forward(const float* x, float* y, int64_t count) {
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = relu(x[i]);
  });
}

void relu_backward(const float* dy, const float* y, float* dx, int64_t count) {
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = relu_grad(dy[i], y[i]);
  });
}

void dropout_forward(const float* x, float* y, int64_t count, float p, uint64_t seed,
                     uint64_t offset) {
  const float scale = dropout_scale(p);
  // Work in groups of four elements: one Philox call decides four of them.
  parallel_for((count + 3) / 4, kGrain / 4, [&](int64_t b, int64_t e) {
    bool keep[4];
    for (int64_t g = b; g < e; ++g) {
      dropout_keep4(seed, offset, static_cast<uint64_t>(g), p, keep);
      for (int64_t j = 0; j < 4 && 4 * g + j < count; ++j)
        y[4 * g + j] = dropout_apply(x[4 * g + j], keep[j], scale);
    }
  });
}

void dropout2d_forward(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                       uint64_t seed, uint64_t offset) {
  const float scale = dropout_scale(p);
  parallel_for(planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      bool keep = dropout_keep(seed, offset, static_cast<uint64_t>(pl), p);
      const float* xp = x + pl * plane_size;
      float* yp = y + pl * plane_size;
      for (int64_t i = 0; i < plane_size; ++i) yp[i] = dropout_apply(xp[i], keep, scale);
    }
  });
}

}  // namespace engine::kernels::cpu
