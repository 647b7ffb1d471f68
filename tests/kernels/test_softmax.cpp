// tests/kernels/test_softmax.cpp: log-softmax at a large logit, NLL's scaled gradient and empty
// batch, fused cross entropy, argmax and accuracy against the reference; bad targets are errors
// naming index and value. Ordinary log-softmax + NLL against the reference:
// the kernel-case table (kernels/testing/table.h). Finite differences:
// tests/nn/test_functional.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/softmax.h"
#include "tests/common/test_util.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;

std::vector<int64_t> targets(int64_t n, int64_t c) {
  std::vector<int64_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = (i * 7 + 3) % c;
  return t;
}

// A logit of 80 must not overflow. Against the reference at ordinary values (these shapes and the
// models'): the kernel-case table (kernels/testing/table.h).
TEST(LogSoftmax, LargeLogitMatchesReference) {
  for (auto [n, c] : {std::pair<int64_t, int64_t>{1, 1}, {5, 10}, {3, 1001}}) {
    auto x = filled(n * c, 1, -3.f, 3.f), dy = filled(n * c, 2, -3.f, 3.f);
    x[0] = 80.f;
    std::vector<float> y(n * c), y_ref(n * c), dx(n * c), dx_ref(n * c);
    cpu::log_softmax_forward(x.data(), y.data(), n, c);
    ref::log_softmax_forward(x.data(), y_ref.data(), n, c);
    EXPECT_LT(ref::max_rel_error(y.data(), y_ref.data(), n * c), 1e-6);
    cpu::log_softmax_backward(dy.data(), y.data(), dx.data(), n, c);
    ref::log_softmax_backward(dy.data(), y_ref.data(), dx_ref.data(), n, c);
    EXPECT_LT(ref::max_rel_error(dx.data(), dx_ref.data(), n * c), 1e-5);
  }
}

// A scaled gradient and an empty batch; scale 1 against the reference: the case table.
TEST(NllLoss, ScaledBackwardAndEmptyBatch) {
  const int64_t n = 37, c = 10;
  auto logp = filled(n * c, 3, -5.f, 0.f);
  auto t = targets(n, c);
  std::vector<float> g(n * c), g_ref(n * c);
  const float half = 0.5f;
  cpu::nll_loss_backward(&half, t.data(), g.data(), n, c);
  ref::nll_loss_backward(0.5f, t.data(), g_ref.data(), n, c);
  EXPECT_EQ(g, g_ref);
  float loss = 0.f;
  cpu::nll_loss_forward(logp.data(), t.data(), &loss, 0, c);
  EXPECT_TRUE(std::isnan(loss));
}

TEST(NllLoss, BadTargetNamesIndexAndValue) {
  const int64_t n = 4, c = 10;
  std::vector<float> logp(n * c, -1.f), g(n * c);
  std::vector<int64_t> t = {1, 2, 10, 3};
  float loss = 0.f;
  const float one = 1.f;
  try {
    cpu::nll_loss_forward(logp.data(), t.data(), &loss, n, c);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("target[2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("= 10"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 10)"), std::string::npos) << msg;
  }
  t[2] = -1;
  EXPECT_THROW(cpu::nll_loss_backward(&one, t.data(), g.data(), n, c), Error);
  EXPECT_THROW(cpu::cross_entropy_forward(logp.data(), t.data(), g.data(), n, c), Error);
}

// Its gradient by finite differences: nn's CrossEntropy check (tests/nn/test_functional.cpp).
TEST(CrossEntropy, FusedEqualsComposed) {
  const int64_t n = 6, c = 7;
  auto x = filled(n * c, 4, -3.f, 3.f);
  auto t = targets(n, c);
  std::vector<float> logp(n * c), logp2(n * c), dx(n * c), dlogp(n * c), dx2(n * c);
  const float loss = cpu::cross_entropy_forward(x.data(), t.data(), logp.data(), n, c);
  cpu::log_softmax_forward(x.data(), logp2.data(), n, c);
  float composed = 0.f;
  const float one = 1.f;
  cpu::nll_loss_forward(logp2.data(), t.data(), &composed, n, c);
  EXPECT_EQ(loss, composed);
  cpu::cross_entropy_backward(1.f, logp.data(), t.data(), dx.data(), n, c);
  cpu::nll_loss_backward(&one, t.data(), dlogp.data(), n, c);
  cpu::log_softmax_backward(dlogp.data(), logp2.data(), dx2.data(), n, c);
  EXPECT_LT(ref::max_rel_error(dx.data(), dx2.data(), n * c), 1e-6);
}

TEST(Argmax, FirstMaximumNaNAndAccuracy) {
  const std::vector<float> x = {1,  3,   3,  0,    //
                                -1, -2,  -3, -4,   //
                                0,  NAN, 5,  NAN,  //
                                2,  2,   2,  9};
  std::vector<int64_t> out(4), out_ref(4);
  cpu::argmax_rows(x.data(), 4, 4, out.data());
  ref::argmax_rows(x.data(), 4, 4, out_ref.data());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 0, 1, 3}));
  EXPECT_EQ(out, out_ref);
  const std::vector<int64_t> t = {1, 0, 2, 3};
  EXPECT_EQ(cpu::accuracy_count(x.data(), t.data(), 4, 4), 3);
}

}  // namespace
}  // namespace engine::kernels
