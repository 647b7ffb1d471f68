// kernels/pool.h: max pooling's shape and window arithmetic, shared by CPU and CUDA.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

// x (N, C, H, W) -> y (N, C, OH, OW), window k x k, stride s, no padding, floor mode.
struct Pool2dShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 2, stride = 2;

  ENGINE_HD int64_t oh() const { return (h - k) / stride + 1; }
  ENGINE_HD int64_t ow() const { return (w - k) / stride + 1; }
  ENGINE_HD int64_t planes() const { return n * c; }
};

// Max of the k x k window at (r0, c0) of a plane of width w; *arg = its index r*w + c in the
// plane. As torch: the first maximum wins, and a NaN wins over any number (the last NaN).
ENGINE_HD float max_pool_window(const float* plane, int64_t w, int64_t r0, int64_t c0, int64_t k,
                                int32_t* arg) {
  int64_t best_i = r0 * w + c0;
  float best = -INFINITY;
  for (int64_t r = r0; r < r0 + k; ++r)
    for (int64_t c = c0; c < c0 + k; ++c) {
      float v = plane[r * w + c];
      if (v > best || v != v) {
        best = v;
        best_i = r * w + c;
      }
    }
  *arg = static_cast<int32_t>(best_i);
  return best;
}

}  // namespace engine::kernels
