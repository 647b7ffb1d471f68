// kernels/cpu/pool.cpp: max pooling, one (n, c) plane per task.
#include "kernels/cpu/pool.h"

#include <cstring>

#include "core/thread_pool.h"

namespace engine::kernels::cpu {

void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  const int64_t oh = s.oh(), ow = s.ow(), in_plane = s.h * s.w, out_plane = oh * ow;
  parallel_for(s.planes(), 4, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const float* xp = x + p * in_plane;
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t c = 0; c < ow; ++c) {
          int64_t o = p * out_plane + r * ow + c;
          y[o] = max_pool_window(xp, s.w, r * s.stride, c * s.stride, s.k, &arg[o]);
        }
    }
  });
}

void max_pool2d_backward(const float* dy, const int32_t* arg, float* dx, const Pool2dShape& s) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh() * s.ow();
  parallel_for(s.planes(), 4, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      float* dxp = dx + p * in_plane;
      std::memset(dxp, 0, sizeof(float) * in_plane);
      // Overlapping windows (stride < k) may pick the same input: gradients add.
      for (int64_t o = 0; o < out_plane; ++o) dxp[arg[p * out_plane + o]] += dy[p * out_plane + o];
    }
  });
}

}  // namespace engine::kernels::cpu
