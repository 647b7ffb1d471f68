// kernels/conv2d.h: the 2-d convolution's shape (dilation 1, groups 1), shared by CPU and CUDA.
// The CPU kernels are in kernels/cpu/conv2d/ (its conv2d.h gives the reading order).
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

// x (N, Cin, H, W), weight (Cout, Cin, KH, KW), bias (Cout), y (N, Cout, OH, OW).
struct Conv2dShape {
  int64_t n = 0, c_in = 0, h = 0, w = 0;
  int64_t c_out = 0, kh = 0, kw = 0;
  int64_t stride = 1, pad = 0;

  ENGINE_HD int64_t oh() const { return (h + 2 * pad - kh) / stride + 1; }
  ENGINE_HD int64_t ow() const { return (w + 2 * pad - kw) / stride + 1; }
  ENGINE_HD int64_t k() const { return c_in * kh * kw; }  // GEMM reduction length
  ENGINE_HD int64_t x_count() const { return n * c_in * h * w; }
  ENGINE_HD int64_t y_count() const { return n * c_out * oh() * ow(); }
  ENGINE_HD int64_t w_count() const { return c_out * c_in * kh * kw; }
};

}  // namespace engine::kernels
