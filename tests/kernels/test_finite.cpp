// tests/kernels/test_finite.cpp: the non-finite scan (one bad element anywhere, in a short or a
// long array, raises the flag; finite extremes do not) and the backward's seed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/finite.h"
#include "kernels/finite.h"

namespace engine::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

float flag_of(const std::vector<float>& x) {
  float flag = 0.f;
  cpu::flag_nonfinite(x.data(), static_cast<int64_t>(x.size()), &flag);
  return flag;
}

TEST(Finite, FiniteExtremesLeaveTheFlagDown) {
  std::vector<float> x = {0.f,
                          -0.f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::lowest(),
                          std::numeric_limits<float>::denorm_min(),
                          1e-40f};
  EXPECT_EQ(flag_of(x), 0.f);
  EXPECT_EQ(flag_of({}), 0.f);
}

TEST(Finite, OneBadElementAnywhereRaisesIt) {
  for (const int64_t n : {1, 15, 17, 1000, (1 << 16) + 3, 300000})
    for (const float bad : {kInf, -kInf, kNan, -kNan})
      for (const int64_t at : {int64_t{0}, n / 2, n - 1}) {
        std::vector<float> x(n, 1.5f);
        x[at] = bad;
        EXPECT_EQ(flag_of(x), 1.f) << "n " << n << " at " << at << " value " << bad;
      }
}

TEST(Finite, TheFlagIsOnlyEverRaised) {
  std::vector<float> good(100, 2.f);
  float flag = 1.f;
  cpu::flag_nonfinite(good.data(), 100, &flag);
  EXPECT_EQ(flag, 1.f);  // a flag raised by an earlier tensor stays up
}

TEST(Finite, SeedIsExactlyOneForAFiniteLossAndNanOtherwise) {
  for (const float loss : {0.f, 2.3f, -1e30f, std::numeric_limits<float>::max()}) {
    float seed = 0.f;
    cpu::finite_seed(&loss, &seed);
    EXPECT_EQ(seed, 1.0f) << loss;
  }
  for (const float loss : {kInf, -kInf, kNan}) {
    float seed = 0.f;
    cpu::finite_seed(&loss, &seed);
    EXPECT_TRUE(std::isnan(seed)) << loss;
  }
  EXPECT_FALSE(finite_bits(kNan));
  EXPECT_TRUE(finite_bits(std::numeric_limits<float>::max()));
}

}  // namespace
}  // namespace engine::kernels
