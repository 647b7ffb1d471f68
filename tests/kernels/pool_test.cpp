// tests/kernels/pool_test.cpp: max pooling against the reference, overlapping windows, NaN,
// argmax indices. Finite differences: nn's MaxPool check (tests/nn/test_functional.cpp).
#include "kernels/cpu/pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/reference.h"
#include "tests/common/test_util.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;

int64_t in_count(const Pool2dShape& s) {
  return s.n * s.c * s.h * s.w;
}
int64_t out_count(const Pool2dShape& s) {
  return s.n * s.c * s.oh() * s.ow();
}

// n, c, h, w, k, stride
const Pool2dShape kShapes[] = {{2, 3, 8, 8, 2, 2},    {3, 2, 7, 9, 2, 2},  {2, 2, 9, 7, 3, 2},
                               {1, 4, 5, 5, 3, 1},    {2, 1, 6, 11, 3, 3}, {1, 1, 1, 1, 1, 1},
                               {64, 32, 28, 28, 2, 2}};

TEST(MaxPool2d, MatchesReference) {
  for (const Pool2dShape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.h) + "x" + std::to_string(s.w) + " k" + std::to_string(s.k) +
                 " s" + std::to_string(s.stride));
    auto x = filled(in_count(s), 1), dy = filled(out_count(s), 2);
    std::vector<float> y(out_count(s)), y_ref(out_count(s)), dx(in_count(s)), dx_ref(in_count(s));
    std::vector<int32_t> arg(out_count(s)), arg_ref(out_count(s));
    cpu::max_pool2d_forward(x.data(), y.data(), arg.data(), s);
    ref::max_pool2d_forward(x.data(), y_ref.data(), arg_ref.data(), s);
    EXPECT_EQ(y, y_ref);
    EXPECT_EQ(arg, arg_ref);
    cpu::max_pool2d_backward(dy.data(), arg.data(), dx.data(), s);
    ref::max_pool2d_backward(dy.data(), arg_ref.data(), dx_ref.data(), s);
    EXPECT_EQ(dx, dx_ref);
  }
}

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

}  // namespace
}  // namespace engine::kernels
