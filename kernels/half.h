// kernels/half.h: the 16-bit floating types as bits (uint16_t) and their conversions to and from
// fp32, shared by CPU and CUDA. bfloat16: fp32's sign, 8-bit exponent and top 7 mantissa bits.
// float16 (IEEE binary16): sign, 5-bit exponent (bias 15), 10 mantissa bits, subnormals below
// 2^-14. Narrowing rounds to nearest, ties to even; NaN stays a (quiet) NaN, infinities stay
// infinite, float16 overflows to infinity. Widening is exact.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace engine::kernels {

ENGINE_HD uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

ENGINE_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// The bfloat16 nearest x (ties to even): bias by 0x7FFF plus the lowest kept bit, then truncate.
ENGINE_HD uint16_t bf16_from_f32(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u | 0x00400000u) >> 16);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

ENGINE_HD float f32_from_bf16(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

// The float16 nearest x (ties to even), after F. Giesen's float_to_half_fast3_rtne: subnormal
// results come from one fp32 addition of a magic number (rounding to nearest even in hardware),
// normal ones from a biased truncation like bf16_from_f32's.
ENGINE_HD uint16_t f16_from_f32(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  uint32_t o;
  if (a >= (127u + 16u) << 23) {  // too large for float16: infinity, or NaN
    o = a > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (a < 113u << 23) {  // below 2^-14: a float16 subnormal or zero
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;  // 0.5
    o = f32_bits(f32_from_bits(a) + f32_from_bits(magic)) - magic;
  } else {
    const uint32_t odd = (a >> 13) & 1u;
    o = (a + ((15u - 127u) << 23) + 0xFFFu + odd) >> 13;
  }
  return static_cast<uint16_t>(o | sign);
}

ENGINE_HD float f32_from_f16(uint16_t h) {
  const uint32_t shifted_exp = 0x7C00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7FFFu) << 13;
  const uint32_t exp = o & shifted_exp;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {  // infinity or NaN
    o += (128u - 16u) << 23;
  } else if (exp == 0) {  // zero or subnormal: renormalise through one fp32 subtraction
    o += 1u << 23;
    o = f32_bits(f32_from_bits(o) - f32_from_bits(113u << 23));
  }
  return f32_from_bits(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

}  // namespace engine::kernels
