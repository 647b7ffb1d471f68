// kernels/cpu/pool.cpp: max pooling loops around kernels/pool.h, parallel over (n, c) planes.
#include "kernels/cpu/pool.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"

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

// The tutorials' 2x2, stride-2 window: compare-and-select without branches (conv outputs make
// the comparisons unpredictable), same result and same NaN rule as max_pool_window.
void pool_plane_2x2(const float* xp, float* yp, int32_t* ap, int64_t w, int64_t oh, int64_t ow) {
  for (int64_t i = 0; i < oh; ++i) {
    const float* r0 = xp + 2 * i * w;
    const float* r1 = r0 + w;
    const int32_t base = static_cast<int32_t>(2 * i * w);
    for (int64_t j = 0; j < ow; ++j) {
      const int32_t c = static_cast<int32_t>(2 * j);
      float best = r0[c];
      int32_t bi = base + c;
      const float v[3] = {r0[c + 1], r1[c], r1[c + 1]};
      const int32_t vi[3] = {base + c + 1, base + static_cast<int32_t>(w) + c,
                             base + static_cast<int32_t>(w) + c + 1};
      for (int q = 0; q < 3; ++q) {
        // As max_pool_window: a larger value wins, and so does any NaN (the last one).
        const bool take = (v[q] > best) | (v[q] != v[q]);
        best = take ? v[q] : best;
        bi = take ? vi[q] : bi;
      }
      yp[i * ow + j] = best;
      ap[i * ow + j] = bi;
    }
  }
}

}  // namespace

void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  check(s, "max_pool2d_forward");
  const int64_t oh = s.oh(), ow = s.ow(), in_plane = s.h * s.w, out_plane = oh * ow;
  parallel_for(s.planes(), grain(s), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * in_plane;
      float* yp = y + p * out_plane;
      int32_t* ap = arg + p * out_plane;
      if (s.k == 2 && s.stride == 2) {
        pool_plane_2x2(xp, yp, ap, s.w, oh, ow);
        continue;
      }
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          yp[i * ow + j] =
              max_pool_window(xp, s.w, i * s.stride, j * s.stride, s.k, &ap[i * ow + j]);
    }
  });
}

void max_pool2d_backward(const float* dy, const int32_t* arg, float* dx, const Pool2dShape& s) {
  check(s, "max_pool2d_backward");
  const int64_t in_plane = s.h * s.w, out_plane = s.oh() * s.ow();
  parallel_for(s.planes(), grain(s), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* dxp = dx + p * in_plane;
      std::fill(dxp, dxp + in_plane, 0.f);
      const float* dyp = dy + p * out_plane;
      const int32_t* ap = arg + p * out_plane;
      for (int64_t i = 0; i < out_plane; ++i) dxp[ap[i]] += dyp[i];
    }
  });
}

}  // namespace engine::kernels::cpu
