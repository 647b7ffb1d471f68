// tests/kernels/test_batchnorm.cpp: batch norm eval forward against the reference, running
// statistics, affine off, error on one value. Train forward and backward against the reference
// (the models' and awkward shapes): the kernel-case table (kernels/testing/table.h). Finite
// differences: tests/nn/test_functional.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/reference.h"
#include "tests/common/test_util.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;

int64_t count(const BatchNormShape& s) {
  return s.n * s.c * s.hw;
}

TEST(BatchNorm, RunningStatsUseUnbiasedVariance) {
  // One channel, values 1..4: mean 2.5, biased var 1.25, unbiased var 5/3.
  const BatchNormShape s{2, 1, 2};
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y(4), mean(1), invstd(1), rm = {0.f}, rv = {1.f};
  cpu::batch_norm_train_forward(x.data(), nullptr, nullptr, y.data(), mean.data(), invstd.data(),
                                rm.data(), rv.data(), s, 0.1f, 1e-5f);
  EXPECT_FLOAT_EQ(mean[0], 2.5f);
  EXPECT_FLOAT_EQ(invstd[0], static_cast<float>(1.0 / std::sqrt(1.25 + 1e-5)));
  EXPECT_FLOAT_EQ(rm[0], 0.25f);
  EXPECT_FLOAT_EQ(rv[0], static_cast<float>(0.9 + 0.1 * 5.0 / 3.0));
  EXPECT_NEAR(y[0], (1.0 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-6);
}

TEST(BatchNorm, EvalForwardMatchesReference) {
  const BatchNormShape s{3, 4, 10};
  auto x = filled(count(s), 6), gamma = filled(s.c, 7), beta = filled(s.c, 8);
  auto rm = filled(s.c, 9), rv = filled(s.c, 10, 0.5f, 2.f);
  std::vector<float> y(count(s)), y_ref(count(s));
  cpu::batch_norm_eval_forward(x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), y.data(),
                               s, 1e-5f);
  ref::batch_norm_eval_forward(x.data(), gamma.data(), beta.data(), rm.data(), rv.data(),
                               y_ref.data(), s, 1e-5f);
  EXPECT_LT(ref::max_rel_error(y.data(), y_ref.data(), count(s)), 1e-6);
}

TEST(BatchNorm, AffineOffAndEvalBackward) {
  const BatchNormShape s{3, 2, 5};
  auto x = filled(count(s), 15), dy = filled(count(s), 16), rm = filled(s.c, 17);
  auto rv = filled(s.c, 18, 0.5f, 2.f);
  std::vector<float> ones(s.c, 1.f), zeros(s.c, 0.f), y1(count(s)), y2(count(s)), m(s.c), is(s.c);
  cpu::batch_norm_train_forward(x.data(), nullptr, nullptr, y1.data(), m.data(), is.data(), nullptr,
                                nullptr, s, 0.1f, 1e-5f);
  cpu::batch_norm_train_forward(x.data(), ones.data(), zeros.data(), y2.data(), m.data(), is.data(),
                                nullptr, nullptr, s, 0.1f, 1e-5f);
  EXPECT_EQ(y1, y2);
  std::vector<float> dx(count(s)), dg(s.c), db(s.c);
  cpu::batch_norm_eval_backward(dy.data(), x.data(), nullptr, rm.data(), rv.data(), dx.data(),
                                dg.data(), db.data(), s, 1e-5f);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t i = 0; i < s.hw; ++i) {
        int64_t at = (n * s.c + c) * s.hw + i;
        EXPECT_NEAR(dx[at], dy[at] / std::sqrt(rv[c] + 1e-5f), 1e-6);
      }
}

TEST(BatchNorm, OneValuePerChannelIsAnError) {
  const BatchNormShape s{1, 3, 1};
  std::vector<float> x(3), y(3), m(3), is(3);
  EXPECT_THROW(cpu::batch_norm_train_forward(x.data(), nullptr, nullptr, y.data(), m.data(),
                                             is.data(), nullptr, nullptr, s, 0.1f, 1e-5f),
               Error);
}

}  // namespace
}  // namespace engine::kernels
