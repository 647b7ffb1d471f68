// tests/kernels/test_pool.cpp: max pooling's known values and ties, NaN, argmax indices, a window
// larger than the input; the 2x2 fast path and the fused relu(max_pool2d) against the reference
// and the unfused composition at awkward shapes. Against the reference (odd sizes, overlapping
// windows): the kernel-case table (kernels/testing/table.h). Finite differences:
// tests/nn/test_functional.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/reference.h"
#include "tests/common/test_util.h"

namespace engine::kernels {
namespace {

TEST(MaxPool2d, KnownValuesAndTies) {
  const Pool2dShape s{1, 1, 2, 4, 2, 2};
  const std::vector<float> x = {1, 5, 3, 3, 2, 4, 3, 0};
  std::vector<float> y(2);
  std::vector<int32_t> arg(2);
  cpu::max_pool2d_forward(x.data(), y.data(), arg.data(), s);
  EXPECT_EQ(y, (std::vector<float>{5, 3}));
  EXPECT_EQ(arg, (std::vector<int32_t>{1, 2}));  // the first of the tied 3s
}

TEST(MaxPool2d, NaNWins) {
  const Pool2dShape s{1, 1, 2, 2, 2, 2};
  const std::vector<float> x = {1, NAN, 7, 2};
  std::vector<float> y(1);
  std::vector<int32_t> arg(1);
  cpu::max_pool2d_forward(x.data(), y.data(), arg.data(), s);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(arg[0], 1);
}

TEST(MaxPool2d, RejectsWindowLargerThanInput) {
  const Pool2dShape s{1, 1, 2, 2, 3, 1};
  std::vector<float> x(4), y(1);
  std::vector<int32_t> arg(1);
  EXPECT_THROW(cpu::max_pool2d_forward(x.data(), y.data(), arg.data(), s), Error);
}

// n, c, h, w, k, stride: the models' pools, rows of 1, 7, 16, 17 and 33 outputs (the SIMD path's
// tails), odd sizes (a row and a column outside every window), overlapping and wider windows.
const Pool2dShape kShapes[] = {{3, 32, 28, 28, 2, 2}, {2, 10, 24, 24, 2, 2}, {2, 20, 8, 8, 2, 2},
                               {1, 1, 2, 2, 2, 2},    {3, 5, 7, 15, 2, 2},   {2, 2, 5, 32, 2, 2},
                               {2, 3, 13, 35, 2, 2},  {1, 2, 9, 67, 2, 2},   {2, 2, 9, 7, 3, 2},
                               {1, 4, 5, 5, 3, 1},    {2, 1, 6, 11, 3, 3},   {1, 1, 1, 1, 1, 1}};

std::vector<float> input(const Pool2dShape& s, uint64_t seed) {
  auto x = engine::testing::filled(s.n * s.c * s.h * s.w, seed, -1.f, 1.f);
  x[0] = 0.f;  // ties at zero and a negative zero
  if (x.size() > 3) x[1] = x[2] = -0.f;
  return x;
}

// The optimised 2x2 backward (written in one pass) and the general one against the reference.
TEST(MaxPool2d, ForwardAndBackwardMatchReference) {
  for (const Pool2dShape& s : kShapes) {
    const auto x = input(s, 5);
    const int64_t out = s.planes() * s.oh() * s.ow();
    const auto dy = engine::testing::filled(out, 6);
    std::vector<float> y(out), ry(out), dx(x.size(), NAN), rdx(x.size());
    std::vector<int32_t> arg(out), rarg(out);
    cpu::max_pool2d_forward(x.data(), y.data(), arg.data(), s);
    ref::max_pool2d_forward(x.data(), ry.data(), rarg.data(), s);
    EXPECT_EQ(y, ry) << s.h << "x" << s.w << " k" << s.k;
    EXPECT_EQ(arg, rarg) << s.h << "x" << s.w << " k" << s.k;
    cpu::max_pool2d_backward(dy.data(), arg.data(), dx.data(), s);
    ref::max_pool2d_backward(dy.data(), rarg.data(), rdx.data(), s);
    EXPECT_EQ(dx, rdx) << s.h << "x" << s.w << " k" << s.k;
  }
}

// relu(max_pool2d(x)) fused equals both compositions: relu after pooling (values, indices, and
// the gradient through relu_backward then max_pool2d_backward) and pooling after relu (values,
// and the input gradient through max_pool2d_backward then relu_backward).
TEST(MaxPool2dRelu, MatchesTheUnfusedComposition) {
  for (const Pool2dShape& s : kShapes) {
    const auto x = input(s, 7);
    const int64_t out = s.planes() * s.oh() * s.ow(), in = static_cast<int64_t>(x.size());
    const auto dy = engine::testing::filled(out, 8);
    std::vector<float> y(out), dx(in, NAN);
    std::vector<int32_t> arg(out);
    cpu::max_pool2d_relu_forward(x.data(), y.data(), arg.data(), s);
    cpu::max_pool2d_relu_backward(dy.data(), y.data(), arg.data(), dx.data(), s);

    std::vector<float> py(out), ry(out), dry(out), pdx(in);
    std::vector<int32_t> parg(out);
    cpu::max_pool2d_forward(x.data(), py.data(), parg.data(), s);
    cpu::relu_forward(py.data(), ry.data(), out);
    EXPECT_EQ(y, ry) << s.h << "x" << s.w << " k" << s.k;
    EXPECT_EQ(arg, parg) << s.h << "x" << s.w << " k" << s.k;
    cpu::relu_backward(dy.data(), ry.data(), dry.data(), out);
    cpu::max_pool2d_backward(dry.data(), parg.data(), pdx.data(), s);
    EXPECT_EQ(dx, pdx) << s.h << "x" << s.w << " k" << s.k;

    std::vector<float> r(in), r_pooled(out), dr(in), rdx(in);
    std::vector<int32_t> rarg(out);
    cpu::relu_forward(x.data(), r.data(), in);
    cpu::max_pool2d_forward(r.data(), r_pooled.data(), rarg.data(), s);
    EXPECT_EQ(y, r_pooled) << s.h << "x" << s.w << " k" << s.k;
    cpu::max_pool2d_backward(dy.data(), rarg.data(), dr.data(), s);
    cpu::relu_backward(dr.data(), r.data(), rdx.data(), in);
    EXPECT_EQ(dx, rdx) << s.h << "x" << s.w << " k" << s.k;
  }
}

TEST(MaxPool2dRelu, NaNPassesWithoutGradientAndAllNegativeGivesZero) {
  const Pool2dShape s{1, 1, 2, 4, 2, 2};
  const std::vector<float> x = {-1, NAN, -3, -2, 2, -4, -5, -6};
  std::vector<float> y(2), dx(8);
  std::vector<int32_t> arg(2);
  cpu::max_pool2d_relu_forward(x.data(), y.data(), arg.data(), s);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(arg, (std::vector<int32_t>{1, 3}));  // the NaN; the max, -2
  const std::vector<float> dy = {1, 1};
  cpu::max_pool2d_relu_backward(dy.data(), y.data(), arg.data(), dx.data(), s);
  EXPECT_EQ(dx, std::vector<float>(8, 0.f));
}

TEST(MaxPool2dRelu, RejectsWindowLargerThanInput) {
  const Pool2dShape s{1, 1, 2, 2, 3, 1};
  std::vector<float> x(4), y(1);
  std::vector<int32_t> arg(1);
  EXPECT_THROW(cpu::max_pool2d_relu_forward(x.data(), y.data(), arg.data(), s), Error);
}

}  // namespace
}  // namespace engine::kernels
