// tests/kernels/test_pool.cpp: max pooling's known values and ties, NaN, argmax indices, a window
// larger than the input. Against the reference (odd sizes, overlapping windows):
// tests/kernels/test_bench_checks.cpp. Finite differences: tests/nn/test_functional.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/pool.h"

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

}  // namespace
}  // namespace engine::kernels
