// tests/kernels/test_bf16_ops.cpp: the vdpbf16ps layers (kernels/cpu/bf16_ops.h) and the flat
// convolutions under them (conv2d/bf16_flat.h) against the rounding reference (reference_bf16.h) on
// awkward shapes. Both multiply the same bf16 values with fp32 sums, so they may differ by fp32
// reassociation only: |got - want| <= 1e-5 of the sum of |products|, which is the reference run
// on |operands|. Skips without AVX512_BF16 (kernels/cpu/cpu_features.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/conv2d/bf16_flat.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/reference_bf16.h"
#include "tests/common/test_util.h"
#include "tests/common/thread_guard.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;

constexpr double kTol = 1e-5;

class Bf16Kernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::has_avx512_bf16())
      GTEST_SKIP() << "this CPU has no AVX512_BF16 (vdpbf16ps): the bf16 kernels cannot run";
  }
};

std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

// Each element within kTol of its sum of |products| (bound) of want.
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<float>& bound, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= kTol * bound[i] + 1e-30)) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i]
                    << " (sum |products| " << bound[i] << ")";
    }
  }
}

std::string name(const LinearShape& s) {
  std::ostringstream os;
  os << "linear N " << s.n << " in " << s.in << " out " << s.out;
  return os.str();
}
std::string name(const Conv2dShape& s) {
  std::ostringstream os;
  os << "conv x (" << s.n << ", " << s.c_in << ", " << s.h << ", " << s.w << ") w (" << s.c_out
     << ", " << s.kh << ", " << s.kw << ") pad " << s.pad << " stride " << s.stride;
  return os.str();
}

// Odd sizes, K below and around the packers' 2 / 16 / 32 steps, N around 16 and 32, batch 1.
const std::vector<LinearShape> kLinear = {{1, 1, 1},     {5, 33, 7},   {17, 3, 40},
                                          {9, 70, 31},   {1, 129, 17}, {64, 100, 10},
                                          {3, 1025, 48}, {23, 32, 33}, {64, 3136, 128}};

void check_linear(const LinearShape& s, uint64_t seed) {
  namespace kc = cpu;
  auto x = filled(s.n * s.in, seed), w = filled(s.out * s.in, seed + 1),
       b = filled(s.out, seed + 2), dy = filled(s.n * s.out, seed + 3);
  auto ax = abs_of(x), aw = abs_of(w), ab = abs_of(b), ady = abs_of(dy);
  std::vector<float> got(s.n * s.out), want(got.size()), bound(got.size());
  kc::linear_forward_bf16(x.data(), w.data(), b.data(), got.data(), s);
  ref::linear_forward_bf16(x.data(), w.data(), b.data(), want.data(), s);
  ref::linear_forward_bf16(ax.data(), aw.data(), ab.data(), bound.data(), s);
  expect_close(got, want, bound, name(s) + " y");
  kc::linear_forward_bf16(x.data(), w.data(), nullptr, got.data(), s);
  ref::linear_forward_bf16(x.data(), w.data(), nullptr, want.data(), s);
  expect_close(got, want, bound, name(s) + " y without bias");

  std::vector<float> dx(s.n * s.in), dxw(dx.size()), dxb(dx.size());
  kc::linear_backward_data_bf16(dy.data(), w.data(), dx.data(), s);
  ref::linear_backward_data_bf16(dy.data(), w.data(), dxw.data(), s);
  ref::linear_backward_data_bf16(ady.data(), aw.data(), dxb.data(), s);
  expect_close(dx, dxw, dxb, name(s) + " dx");

  for (float beta : {0.f, 1.f}) {
    auto dw = filled(s.out * s.in, seed + 4), dww = dw, dwb = abs_of(dw);
    kc::linear_backward_weight_bf16(dy.data(), x.data(), dw.data(), s, beta);
    ref::linear_backward_weight_bf16(dy.data(), x.data(), dww.data(), s, beta);
    ref::linear_backward_weight_bf16(ady.data(), ax.data(), dwb.data(), s, beta);
    expect_close(dw, dww, dwb, name(s) + " dw beta " + std::to_string(beta));
  }
}

TEST_F(Bf16Kernels, LinearMatchesTheRoundingReference) {
  uint64_t seed = 1;
  for (const auto& s : kLinear) check_linear(s, seed += 10);
}

TEST_F(Bf16Kernels, LinearBackwardWeightOfAnEmptyBatchIsBetaTimesDw) {
  LinearShape s{0, 5, 3};
  std::vector<float> dw = filled(15, 7), want = dw;
  cpu::linear_backward_weight_bf16(nullptr, nullptr, dw.data(), s, 1.f);
  EXPECT_EQ(dw, want);
  cpu::linear_backward_weight_bf16(nullptr, nullptr, dw.data(), s, 0.f);
  EXPECT_EQ(dw, std::vector<float>(15, 0.f));
}

using ConvFwd =
    std::function<void(const float*, const float*, const float*, float*, const Conv2dShape&)>;
using ConvBackwardInput =
    std::function<void(const float*, const float*, float*, const Conv2dShape&)>;
using ConvBackwardWeight =
    std::function<void(const float*, const float*, float*, float*, const Conv2dShape&, float)>;

// fwd / backward_input / backward_weight against the reference; backward_weight's bias (when it
// takes one) too.
void check_conv(const Conv2dShape& s, uint64_t seed, const ConvFwd& fwd,
                const ConvBackwardInput& backward_input, const ConvBackwardWeight& backward_weight,
                bool with_bias) {
  namespace kc = cpu;
  auto x = filled(s.x_count(), seed), w = filled(s.w_count(), seed + 1),
       b = filled(s.c_out, seed + 2), dy = filled(s.y_count(), seed + 3);
  auto ax = abs_of(x), aw = abs_of(w), ab = abs_of(b), ady = abs_of(dy);
  std::vector<float> y(s.y_count()), yw(y.size()), yb(y.size());
  fwd(x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), s);
  ref::conv2d_forward_bf16(x.data(), w.data(), with_bias ? b.data() : nullptr, yw.data(), s);
  ref::conv2d_forward_bf16(ax.data(), aw.data(), ab.data(), yb.data(), s);
  expect_close(y, yw, yb, name(s) + " y");

  std::vector<float> dx(s.x_count()), dxw(dx.size()), dxb(dx.size());
  backward_input(dy.data(), w.data(), dx.data(), s);
  ref::conv2d_backward_input_bf16(dy.data(), w.data(), dxw.data(), s);
  ref::conv2d_backward_input_bf16(ady.data(), aw.data(), dxb.data(), s);
  expect_close(dx, dxw, dxb, name(s) + " dx");

  for (float beta : {0.f, 1.f}) {
    auto dw = filled(s.w_count(), seed + 4), dww = dw, dwb = abs_of(dw);
    auto db = filled(s.c_out, seed + 5), dbw = db, dbb = abs_of(db);
    backward_weight(x.data(), dy.data(), dw.data(), with_bias ? db.data() : nullptr, s, beta);
    ref::conv2d_backward_weight_bf16(x.data(), dy.data(), dww.data(), dbw.data(), s, beta);
    ref::conv2d_backward_weight_bf16(ax.data(), ady.data(), dwb.data(), dbb.data(), s, beta);
    expect_close(dw, dww, dwb, name(s) + " dw beta " + std::to_string(beta));
    if (with_bias) expect_close(db, dbw, dbb, name(s) + " db beta " + std::to_string(beta));
  }
}

// Stride 1, pad 0 .. k - 1, non-square inputs and kernels, even channel counts (what the flat
// passes take) around 16 and 32, batch 1.
const std::vector<Conv2dShape> kFlatShapes = {
    {1, 2, 5, 7, 2, 3, 3, 1, 1},
    {2, 4, 9, 6, 6, 3, 3, 1, 0},
    {1, 6, 11, 13, 18, 5, 5, 1, 2},
    {3, 2, 6, 6, 34, 1, 1, 1, 0},
    {2, 6, 8, 10, 40, 2, 2, 1, 1},
    {1, 16, 14, 14, 32, 5, 5, 1, 4},
    {2, 10, 4, 30, 16, 3, 5, 1, 2},
    {5, 4, 3, 3, 2, 3, 3, 1, 2},
    {2, 34, 7, 7, 66, 3, 3, 1, 1},
    // Wide planes: the forward computes whole padded rows ("flat") rather than listed outputs.
    {1, 4, 30, 30, 6, 3, 3, 1, 1},
    {2, 2, 16, 31, 4, 1, 1, 1, 0},
};

TEST_F(Bf16Kernels, FlatConvolutionsMatchTheRoundingReference) {
  uint64_t seed = 100;
  auto weight = [](const float* x, const float* dy, float* dw, float* db, const Conv2dShape& s,
                   float beta) {
    cpu::detail::conv2d_backward_weight_bf16_flat(x, dy, dw, db, s, beta);
  };
  for (const auto& s : kFlatShapes) {
    ASSERT_TRUE(cpu::detail::conv2d_bf16_flat_supported(s)) << name(s);
    check_conv(s, seed += 10, cpu::detail::conv2d_forward_bf16_flat,
               cpu::detail::conv2d_backward_input_bf16_flat, weight, true);
  }
  // The weight gradient alone also takes odd channel counts and any padding.
  auto fwd = [](const float* x, const float* w, const float* b, float* y, const Conv2dShape& s) {
    ref::conv2d_forward_bf16(x, w, b, y, s);
  };
  auto input = [](const float* dy, const float* w, float* dx, const Conv2dShape& s) {
    ref::conv2d_backward_input_bf16(dy, w, dx, s);
  };
  for (const Conv2dShape& s :
       {Conv2dShape{3, 1, 28, 28, 16, 5, 5, 1, 2}, Conv2dShape{2, 3, 7, 9, 5, 3, 3, 1, 3},
        Conv2dShape{1, 5, 6, 6, 1, 1, 1, 1, 0}}) {
    ASSERT_TRUE(cpu::detail::conv2d_bf16_flat_weight_supported(s)) << name(s);
    check_conv(s, seed += 10, fwd, input, weight, true);
  }
}

// The public functions on the models' layers (GEMM path) and on the shapes they hand to the
// reference (stride 2, Cin 1, odd channel counts, small).
TEST_F(Bf16Kernels, ConvolutionsMatchTheRoundingReference) {
  const std::vector<Conv2dShape> shapes = {
      {8, 16, 14, 14, 32, 5, 5, 1, 2},
      {4, 32, 14, 14, 64, 3, 3, 1, 1},
      {3, 10, 12, 12, 20, 5, 5, 1, 0},
      {4, 1, 28, 28, 16, 5, 5, 1, 2},
      {2, 3, 9, 9, 4, 3, 3, 2, 1},
      {1, 2, 4, 4, 3, 3, 3, 1, 1},
      {4, 5, 14, 14, 7, 3, 3, 1, 1},
      // Batches past one L2-sized group of samples: each thread converts and multiplies groups.
      {48, 32, 14, 14, 32, 3, 3, 1, 1},
      {64, 16, 14, 14, 32, 5, 5, 1, 2},
      // OH OW a multiple of 32 and OW even: the weight gradient packs dy in place (no copy), in
      // one group of samples ({3, 10, 12, ...} above) and in several (simplecnn's conv2, 2
      // samples a group).
      {5, 32, 26, 26, 64, 3, 3, 1, 0}};
  uint64_t seed = 500;
  for (const auto& s : shapes)
    check_conv(s, seed += 10, cpu::conv2d_forward_bf16, cpu::conv2d_backward_input_bf16,
               cpu::conv2d_backward_weight_bf16, true);
}

void expect_same_bits_on_1_and_2_threads(const Conv2dShape& s) {
  const LinearShape l{19, 300, 70};
  auto x = filled(s.x_count(), 1), w = filled(s.w_count(), 2), dy = filled(s.y_count(), 3);
  auto lx = filled(l.n * l.in, 4), lw = filled(l.out * l.in, 5);
  auto run = [&](int threads) {
    engine::testing::ThreadCount guard(threads);
    std::vector<float> y(s.y_count()), dx(s.x_count()), dw(s.w_count()), ly(l.n * l.out);
    cpu::conv2d_forward_bf16(x.data(), w.data(), nullptr, y.data(), s);
    cpu::conv2d_backward_input_bf16(dy.data(), w.data(), dx.data(), s);
    cpu::conv2d_backward_weight_bf16(x.data(), dy.data(), dw.data(), nullptr, s, 0.f);
    cpu::linear_forward_bf16(lx.data(), lw.data(), nullptr, ly.data(), l);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    y.insert(y.end(), ly.begin(), ly.end());
    return y;
  };
  EXPECT_EQ(run(1), run(2)) << name(s);
}

// Each output is summed by one thread in a fixed order: 1 and 2 threads give the same bits.
TEST_F(Bf16Kernels, ResultsDoNotDependOnTheThreadCount) {
  // Several sample groups; the second's weight gradient reads dy in place.
  for (const Conv2dShape& s :
       {Conv2dShape{72, 16, 14, 14, 32, 5, 5, 1, 2}, Conv2dShape{7, 32, 26, 26, 64, 3, 3, 1, 0}})
    expect_same_bits_on_1_and_2_threads(s);
}

}  // namespace
}  // namespace engine::kernels
