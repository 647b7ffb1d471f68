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

}  // namespace

void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  check(s, "max_pool2d_forward");
  const int64_t oh = s.oh(), ow = s.ow(), in_plane = s.h * s.w, out_plane = oh * ow;
  parallel_for(s.planes(), grain(s), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * in_plane;
      float* yp = y + p * out_plane;
      int32_t* ap = arg + p * out_plane;
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
