// tests/kernels/test_activation_dropout.cpp: ReLU at zero, NaN and in place, its backward from
// the input or the output; dropout and dropout2d mask statistics, same mask for the same (seed,
// offset), p = 0 and p = 1, keep4 = keep. Against the reference (every p, awkward sizes):
// the kernel-case table (kernels/testing/table.h).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/dropout.h"
#include "tests/common/test_util.h"
#include "tests/common/thread_guard.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;

TEST(Relu, ZeroAndBackwardFromInputOrOutput) {
  auto x = filled(100003, 1), dy = filled(100003, 2);
  x[5] = 0.f;
  x[6] = -0.f;
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), dx(x.size()), dx_from_x(x.size());
  cpu::relu_forward(x.data(), y.data(), n);
  EXPECT_EQ(y[5], 0.f);
  EXPECT_EQ(y[6], 0.f);
  cpu::relu_backward(dy.data(), y.data(), dx.data(), n);
  EXPECT_EQ(dx[5], 0.f);  // gradient 0 at 0, as torch
  EXPECT_EQ(dx[6], 0.f);
  // From the input instead of the output: same gradient.
  cpu::relu_backward(dy.data(), x.data(), dx_from_x.data(), n);
  EXPECT_EQ(dx, dx_from_x);
}

TEST(Relu, NaNPropagatesAndInPlace) {
  std::vector<float> x = {-1.f, NAN, 2.f};
  cpu::relu_forward(x.data(), x.data(), 3);
  EXPECT_EQ(x[0], 0.f);
  EXPECT_TRUE(std::isnan(x[1]));
  EXPECT_EQ(x[2], 2.f);
}

TEST(Dropout, Keep4MatchesKeep) {
  for (uint64_t g = 0; g < 100; ++g) {
    bool keep[4];
    dropout_keep4(9, 3, g, 0.3f, keep);
    for (uint64_t j = 0; j < 4; ++j) EXPECT_EQ(keep[j], dropout_keep(9, 3, 4 * g + j, 0.3f));
  }
}

TEST(Dropout, MaskFractionIsAboutP) {
  const int64_t n = 200000;
  std::vector<uint8_t> mask(n);
  for (float p : {0.1f, 0.5f, 0.8f}) {
    cpu::dropout_mask(mask.data(), n, p, 1234, 0);
    int64_t kept = 0;
    for (uint8_t m : mask) kept += m;
    // Binomial standard deviation is at most sqrt(n)/2 ~ 224: allow 5 of them.
    EXPECT_NEAR(double(kept), double(n) * (1.0 - p), 1200.0) << "p " << p;
  }
}

TEST(Dropout, EdgeProbabilities) {
  const int64_t n = 1000;
  auto x = filled(n, 4);
  std::vector<float> y(n);
  cpu::dropout_forward(x.data(), y.data(), n, 0.f, 5, 0);
  EXPECT_EQ(y, x);  // p = 0: identity
  cpu::dropout_forward(x.data(), y.data(), n, 1.f, 5, 0);
  for (float v : y) EXPECT_EQ(v, 0.f);  // p = 1: all zero
  EXPECT_THROW(cpu::dropout_forward(x.data(), y.data(), n, 1.5f, 5, 0), Error);
  EXPECT_THROW(cpu::dropout_forward(x.data(), y.data(), n, -0.1f, 5, 0), Error);
}

// The kept-mask path draws exactly dropout_keep's mask (the scalar Philox of kernels/dropout.h):
// sizes around the 64-element SIMD block and the parallel grain, offsets whose counters carry
// into the high word inside a block, every p, in place; its backward equals the redrawing one.
TEST(Dropout, KeptMaskIsDropoutKeepsAndBackwardMatches) {
  for (int threads : {1, 2}) {
    engine::testing::ThreadCount guard(threads);
    for (int64_t n : {0, 1, 3, 4, 5, 63, 64, 65, 1000, 16383, 16385, 3 * 64 * 3136 + 7})
      for (uint64_t offset : {uint64_t{0}, uint64_t{5}, uint64_t{0xFFFFFFF8}, ~uint64_t{0} - 20})
        for (float p : {0.f, 0.25f, 0.5f, 1.f}) {
          const auto x = filled(n, 8), dy = filled(n, 9);
          const float scale = dropout_scale(p);
          std::vector<float> y(n), dx(n), want_dx(n), inplace = x;
          std::vector<uint8_t> mask(n, 7), want(n), mask2(n);
          cpu::dropout_forward_mask(x.data(), y.data(), mask.data(), n, p, 31, offset);
          cpu::dropout_mask(want.data(), n, p, 31, offset);
          ASSERT_EQ(mask, want) << "n " << n << " offset " << offset << " p " << p;
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(y[i], want[i] ? x[i] * scale : 0.f) << "n " << n << " element " << i;
          cpu::dropout_forward_mask(inplace.data(), inplace.data(), mask2.data(), n, p, 31, offset);
          EXPECT_EQ(inplace, y);
          cpu::dropout_backward_mask(dy.data(), mask.data(), dx.data(), n, p);
          cpu::dropout_backward(dy.data(), want_dx.data(), n, p, 31, offset);
          ASSERT_EQ(dx, want_dx) << "n " << n << " offset " << offset << " p " << p;
        }
  }
  std::vector<float> x(4), y(4);
  EXPECT_THROW(cpu::dropout_forward_mask(x.data(), y.data(), nullptr, 4, 0.5f, 1, 0), Error);
  EXPECT_THROW(cpu::dropout_backward_mask(x.data(), nullptr, y.data(), 0, 1.5f), Error);
}

TEST(Dropout, SameMaskForSameSeedAndOffsetAndBackwardUsesIt) {
  const int64_t n = 5003;
  const float p = 0.4f;
  auto x = filled(n, 6), dy = filled(n, 7);
  std::vector<float> a(n), b(n), c(n), dx(n);
  {
    engine::testing::ThreadCount threads(1);
    cpu::dropout_forward(x.data(), a.data(), n, p, 77, 100);
    threads.set(2);
    cpu::dropout_forward(x.data(), b.data(), n, p, 77, 100);
  }
  EXPECT_EQ(a, b);
  cpu::dropout_forward(x.data(), c.data(), n, p, 77, 101);  // another offset: another mask
  EXPECT_NE(a, c);
  cpu::dropout_backward(dy.data(), dx.data(), n, p, 77, 100);
  const float scale = 1.f / 0.6f;
  for (int64_t i = 0; i < n; ++i) {
    const bool kept = a[i] != 0.f;
    EXPECT_EQ(dx[i], kept ? dy[i] * scale : 0.f) << i;
    if (kept) {
      EXPECT_EQ(a[i], x[i] * scale);
    }
  }
}

TEST(Dropout2d, ZeroesWholePlanes) {
  const int64_t planes = 2 * 64, plane = 49;  // (N=2, C=64, 7x7)
  const float p = 0.5f;
  auto x = filled(planes * plane, 8);
  for (float& v : x) v += 2.f;  // no zeros in x
  std::vector<float> y(x.size()), dx(x.size());
  cpu::dropout2d_forward(x.data(), y.data(), planes, plane, p, 3, 9);
  int64_t dropped = 0;
  for (int64_t q = 0; q < planes; ++q) {
    const bool keep = dropout_keep(3, 9, static_cast<uint64_t>(q), p);
    dropped += keep ? 0 : 1;
    for (int64_t i = 0; i < plane; ++i)
      EXPECT_EQ(y[q * plane + i], keep ? x[q * plane + i] * 2.f : 0.f);
  }
  EXPECT_GT(dropped, planes / 4);
  EXPECT_LT(dropped, 3 * planes / 4);
  cpu::dropout2d_backward(x.data(), dx.data(), planes, plane, p, 3, 9);
  EXPECT_EQ(dx, y);  // backward applies the same mask and scale
}

}  // namespace
}  // namespace engine::kernels
