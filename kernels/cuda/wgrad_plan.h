// kernels/cuda/wgrad_plan.h: the arithmetic of the engine's weight-gradient kernel
// (kernels/cuda/wgrad.cu), host-device so the CPU tests run it against the reference.
// A convolution's weight gradient is a GEMM with a long reduction:
//   dw (M = c_out, K = c_in*kh*kw) = sum over q in [0, Q = n*oh*ow) of dy[m, q] * col[j, q]
// where dy[m, q] = dy[n, m, oy, ox] and col[j, q] = x[n, ci, oy*stride - pad + r, ox*stride -
// pad + c] (0 outside the image), j = (ci, r, c), q = (n, oy, ox). A linear layer is the 1x1
// convolution of a 1x1 image: dw (out, in) = sum over n of dy[n, m] x[n, j].
// Q is cut into `slices` runs of `slice_len` positions, fixed by the shape alone (not by the
// GPU): each block sums one tile of dw over one run in q order, and a second pass adds the runs
// in slice order. So the sums' order, and the result, is the same on every run and every GPU.
#pragma once
#include <cstdint>

#include "core/hd.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"

namespace engine::kernels::cuda {

// Positions a block loads per step (the tile's depth), and the plan's limits.
constexpr int kWgradChunk = 16;
constexpr int64_t kWgradMinSlice = 256;  // positions per slice at least
constexpr int64_t kWgradMaxSlices = 512;

// int32 throughout: the caller checks that x, dy and the partial sums have under 2^31 elements.
struct WgradGeom {
  int32_t m = 0, k = 0;            // dw (m, k)
  int32_t q = 0, p = 0;            // positions in all, per sample (oh*ow)
  int32_t c_in = 0, h = 0, w = 0;  // x (n, c_in, h, w)
  int32_t kh = 0, kw = 0, ow = 0, stride = 1, pad = 0;
  int32_t slice_len = 0, slices = 0;
};

ENGINE_HD int64_t wgrad_slice_len(int64_t q) {
  const int64_t per = (q + kWgradMaxSlices - 1) / kWgradMaxSlices;
  const int64_t len = (per + kWgradChunk - 1) / kWgradChunk * kWgradChunk;
  return len > kWgradMinSlice ? len : kWgradMinSlice;
}

inline WgradGeom wgrad_geom(const Conv2dShape& s) {
  WgradGeom g;
  g.m = static_cast<int32_t>(s.c_out);
  g.k = static_cast<int32_t>(s.k());
  g.p = static_cast<int32_t>(s.oh() * s.ow());
  g.q = static_cast<int32_t>(s.n * s.oh() * s.ow());
  g.c_in = static_cast<int32_t>(s.c_in);
  g.h = static_cast<int32_t>(s.h);
  g.w = static_cast<int32_t>(s.w);
  g.kh = static_cast<int32_t>(s.kh);
  g.kw = static_cast<int32_t>(s.kw);
  g.ow = static_cast<int32_t>(s.ow());
  g.stride = static_cast<int32_t>(s.stride);
  g.pad = static_cast<int32_t>(s.pad);
  g.slice_len = static_cast<int32_t>(wgrad_slice_len(g.q));
  g.slices = g.q == 0 ? 0 : (g.q + g.slice_len - 1) / g.slice_len;
  return g;
}

// A linear layer as the 1x1 convolution of a 1x1 image.
inline WgradGeom wgrad_geom(const LinearShape& s) {
  return wgrad_geom(Conv2dShape{s.n, s.in, 1, 1, s.out, 1, 1, 1, 0});
}

// dy[m, q] of dy (n, m, p).
ENGINE_HD float wgrad_dy_at(const float* dy, const WgradGeom& g, int32_t m, int32_t q) {
  const int32_t n = q / g.p, pos = q - n * g.p;
  return dy[(n * g.m + m) * g.p + pos];
}

// col[j, q]: the input under weight j at output position q; 0 in the padding.
ENGINE_HD float wgrad_x_at(const float* x, const WgradGeom& g, int32_t j, int32_t q) {
  const int32_t taps = g.kh * g.kw, ci = j / taps, t = j - ci * taps, r = t / g.kw;
  const int32_t c = t - r * g.kw, n = q / g.p, pos = q - n * g.p, oy = pos / g.ow;
  const int32_t ox = pos - oy * g.ow;
  const int32_t iy = oy * g.stride - g.pad + r, ix = ox * g.stride - g.pad + c;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.f;
  return x[((n * g.c_in + ci) * g.h + iy) * g.w + ix];
}

// dx[n, ci, iy, ix] (e its index in x) from dcol (n, k, p), the input gradient's columns: the sum
// over the taps (r, c), in order, of dcol[n, (ci, r, c), (oy, ox)] where oy*stride - pad + r = iy
// and ox*stride - pad + c = ix. A gather: no atomics (kernels/cuda/conv_bf16.cu's col2im).
ENGINE_HD float col2im_at(const float* dcol, const WgradGeom& g, int32_t e) {
  const int32_t ix = e % g.w, t = e / g.w, iy = t % g.h, t2 = t / g.h, ci = t2 % g.c_in;
  const int32_t n = t2 / g.c_in, oh = g.p / g.ow;
  float sum = 0.f;
  for (int32_t r = 0; r < g.kh; ++r) {
    const int32_t yy = iy + g.pad - r;
    if (yy < 0 || yy % g.stride != 0 || yy / g.stride >= oh) continue;
    for (int32_t c = 0; c < g.kw; ++c) {
      const int32_t xx = ix + g.pad - c;
      if (xx < 0 || xx % g.stride != 0 || xx / g.stride >= g.ow) continue;
      const int32_t j = (ci * g.kh + r) * g.kw + c;
      sum += dcol[(n * g.k + j) * g.p + (yy / g.stride) * g.ow + xx / g.stride];
    }
  }
  return sum;
}

// The final value of output (m, j) (j == k: the bias) from its sum: beta * old + sum; beta 0
// writes the sum (a fresh block's NaN is not kept, as the CPU).
ENGINE_HD float wgrad_finish(float old, float sum, float beta) {
  return beta == 0.f ? sum : beta * old + sum;
}

}  // namespace engine::kernels::cuda
