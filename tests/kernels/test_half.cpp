// tests/kernels/test_half.cpp: the 16-bit float conversions of kernels/half.h - float16 against the
// hardware's (F16C's round to nearest even) over every float16 value, their
// midpoints and random floats; bfloat16 against the vectorised round_to_bf16; and the fp32
// combine-then-round-once reductions of kernels/cpu/reduce.h.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/reduce.h"
#include "kernels/half.h"

namespace engine::kernels {
namespace {

// F16C's conversions, on every x86-64 CPU we run on; not the compiler's _Float16, which clang 14
// (the sanitizer builds') does not support on x86.
__attribute__((target("f16c"))) uint16_t ref_f16(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float ref_f32(uint16_t h) {
  return _cvtsh_ss(h);
}

bool is_nan16(uint16_t h) {
  return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0;
}

TEST(Half, F16WidenIsExactAndNarrowsBack) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float x = f32_from_f16(h);
    if (is_nan16(h)) {
      EXPECT_TRUE(std::isnan(x)) << std::hex << b;
      EXPECT_TRUE(is_nan16(f16_from_f32(x))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(x, ref_f32(h)) << std::hex << b;
    ASSERT_EQ(f16_from_f32(x), h) << std::hex << b;
  }
}

TEST(Half, F16NarrowsToNearestEvenLikeTheHardware) {
  // Midpoints between neighbouring float16 values (ties), and just either side of them.
  for (uint32_t b = 0; b < 0x7BFF; ++b) {
    const float lo = f32_from_f16(static_cast<uint16_t>(b));
    const float hi = f32_from_f16(static_cast<uint16_t>(b + 1));
    const float mid = lo + (hi - lo) / 2;  // exact in fp32
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid})
      ASSERT_EQ(f16_from_f32(x), ref_f16(x)) << x;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float x;
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) continue;
    ASSERT_EQ(f16_from_f32(x), ref_f16(x)) << std::hex << u;
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f16_from_f32(inf), 0x7C00);
  EXPECT_EQ(f16_from_f32(-inf), 0xFC00);
  EXPECT_EQ(f16_from_f32(65520.0f), 0x7C00);  // the first value that rounds to infinity
  EXPECT_EQ(f16_from_f32(65519.0f), 0x7BFF);
  EXPECT_TRUE(is_nan16(f16_from_f32(std::nanf(""))));
}

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_from_f32(1.0f), 0x3F80);
  EXPECT_EQ(bf16_from_f32(1.0f + 0x1p-8f), 0x3F80);             // tie: stays even
  EXPECT_EQ(bf16_from_f32(1.0f + 3 * 0x1p-8f), 0x3F82);         // tie: up to even
  EXPECT_EQ(bf16_from_f32(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // above the tie
  EXPECT_EQ(bf16_from_f32(-2.0f), 0xC000);
  EXPECT_EQ(f32_from_bf16(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(f32_from_bf16(bf16_from_f32(std::nanf("")))));
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> x(100000), rounded(x.size());
  for (auto& v : x) {
    uint32_t u = bits(rng);
    std::memcpy(&v, &u, 4);
  }
  cpu::round_to_bf16(x.data(), rounded.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float mine = f32_from_bf16(bf16_from_f32(x[i]));
    if (std::isnan(x[i]))
      ASSERT_TRUE(std::isnan(mine));
    else
      ASSERT_EQ(mine, rounded[i]) << x[i];
  }
}

// Each element combined in fp32 and rounded once: 1 + 2^-8 (exact in fp32) is a tie between two
// bf16 values and rounds to the even one, 1.0.
TEST(Half, ReduceCombinesInFp32AndRoundsOnce) {
  std::vector<uint16_t> a = {bf16_from_f32(1.0f), bf16_from_f32(3.0f), bf16_from_f32(-2.0f)};
  std::vector<uint16_t> b = {bf16_from_f32(0x1p-8f), bf16_from_f32(0.5f), bf16_from_f32(-7.0f)};
  cpu::reduce_into_bf16(a.data(), b.data(), 3, ReduceOp::Sum);
  EXPECT_EQ(f32_from_bf16(a[0]), 1.0f);
  EXPECT_EQ(f32_from_bf16(a[1]), 3.5f);
  EXPECT_EQ(f32_from_bf16(a[2]), -9.0f);
  std::vector<uint16_t> c = {f16_from_f32(1.5f), f16_from_f32(-1.0f), f16_from_f32(2048.0f)};
  std::vector<uint16_t> d = {f16_from_f32(2.0f), f16_from_f32(4.0f), f16_from_f32(1.0f)};
  cpu::reduce_into_f16(c.data(), d.data(), 3, ReduceOp::Prod);
  EXPECT_EQ(f32_from_f16(c[0]), 3.0f);
  EXPECT_EQ(f32_from_f16(c[1]), -4.0f);
  EXPECT_EQ(f32_from_f16(c[2]), 2048.0f);
  cpu::reduce_into_f16(c.data(), d.data(), 3, ReduceOp::Max);
  EXPECT_EQ(f32_from_f16(c[1]), 4.0f);
  cpu::divide_f16(c.data(), 3, 3.0f);
  EXPECT_EQ(c[0], f16_from_f32(1.0f));
  EXPECT_EQ(c[1], f16_from_f32(4.0f / 3.0f));
  std::vector<uint8_t> u = {250, 3}, v = {10, 4};
  cpu::reduce_into(u.data(), v.data(), 2, ReduceOp::Sum);
  EXPECT_EQ(u[0], 4);  // wraps mod 256
  EXPECT_EQ(u[1], 7);
  std::vector<int32_t> i = {-5, 7}, j = {3, -9};
  cpu::reduce_into(i.data(), j.data(), 2, ReduceOp::Min);
  EXPECT_EQ(i[0], -5);
  EXPECT_EQ(i[1], -9);
}

}  // namespace
}  // namespace engine::kernels
