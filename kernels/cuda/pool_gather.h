// kernels/cuda/pool_gather.h: the engine's max-pool backward for one input element
// (kernels/cuda/pool.cu, CudaKernels::Engine), host-device so the CPU tests run it against the
// reference. A gather: the element sums, in window order, dy of each window covering it whose
// argmax is that element; no atomics, so overlapping windows sum in one fixed order. In int32
// (the caller checks the tensors are under 2^31 elements): 64-bit division is a long software
// routine on a GPU, and the library's gather did four per element.
#pragma once
#include <cstdint>

#include "core/hd.h"
#include "kernels/activation.h"

namespace engine::kernels::cuda {

struct PoolGeom {
  int32_t h = 0, w = 0, k = 2, stride = 2, oh = 0, ow = 0;
};

// Windows r with r*stride <= pos < r*stride + k, clipped to [0, out): [*lo, *hi].
ENGINE_HD void pool_covering(int32_t pos, int32_t k, int32_t stride, int32_t out, int32_t* lo,
                             int32_t* hi) {
  const int32_t first = pos - k + 1;
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int32_t last = pos / stride;
  *hi = last < out - 1 ? last : out - 1;
}

// dx of element i of (planes, h, w), from dy and arg (planes, oh, ow); with Relu (y the
// forward's output) through relu_grad(dy, y) first.
template <bool Relu>
ENGINE_HD float pool_gather(const float* dy, const float* y, const int32_t* arg, const PoolGeom& g,
                            int32_t i) {
  const int32_t plane = g.h * g.w, q = i / plane, pos = i - q * plane, row = pos / g.w;
  const int32_t col = pos - row * g.w, base = q * g.oh * g.ow;
  int32_t r0, r1, c0, c1;
  pool_covering(row, g.k, g.stride, g.oh, &r0, &r1);
  pool_covering(col, g.k, g.stride, g.ow, &c0, &c1);
  float sum = 0.f;
  for (int32_t r = r0; r <= r1; ++r)
    for (int32_t c = c0; c <= c1; ++c) {
      const int32_t o = base + r * g.ow + c;
      if (arg[o] == pos) sum += Relu ? relu_grad(dy[o], y[o]) : dy[o];
    }
  return sum;
}

}  // namespace engine::kernels::cuda
