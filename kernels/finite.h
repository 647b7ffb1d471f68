// kernels/finite.h: is a float finite, by its bits (the same answer under -ffast-math and on
// a GPU), and the seed of a backward that carries a non-finite loss into every gradient.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace engine::kernels {

// False for inf, -inf and every NaN: the exponent bits all set.
ENGINE_HD bool finite_bits(float x) {
  uint32_t u;
#ifdef __CUDA_ARCH__
  u = __float_as_uint(x);
#else
  std::memcpy(&u, &x, sizeof u);
#endif
  return (u & 0x7f800000u) != 0x7f800000u;
}

// 1 for a finite loss (exactly: the backward is unchanged bit for bit), NaN otherwise, so that
// a non-finite loss on any rank makes the synchronised gradients non-finite on every rank.
ENGINE_HD float finite_seed(float loss) {
  if (finite_bits(loss)) return 1.0f;
  const uint32_t quiet_nan = 0x7fc00000u;
#ifdef __CUDA_ARCH__
  return __uint_as_float(quiet_nan);
#else
  float f;
  std::memcpy(&f, &quiet_nan, sizeof f);
  return f;
#endif
}

}  // namespace engine::kernels
