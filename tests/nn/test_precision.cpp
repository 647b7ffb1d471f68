// tests/nn/test_precision.cpp: --precision bf16 at the op level. Under PrecisionScope(BF16),
// conv2d and linear give exactly what the kernels' *_bf16 functions give, forward and backward
// (the backward keeps the forward's precision even when the setting changes in between), differ
// from fp32 by bf16 rounding only, and leave every other op in fp32. On a CUDA device the same ops
// match the CPU's bf16 results. Skips without AVX512_BF16 (kernels/cpu/cpu_features.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/autograd.h"
#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/cpu_features.h"
#include "nn/functional.h"
#include "nn/precision.h"
#include "tests/common/test_util.h"

namespace engine {
namespace {

using engine::testing::random_tensor;
using engine::testing::rel_error;
using nn::Precision;
using nn::PrecisionScope;

class Bf16Ops : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::cpu::has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
};

Tensor leaf(const Shape& s, uint64_t seed) {
  Tensor t = random_tensor(s, seed);
  t.set_requires_grad(true);
  return t;
}

TEST(RoundToBf16, TiesGoToEvenAndSpecialsSurvive) {
  using kernels::cpu::round_to_bf16;
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to the even mantissa, 1.
  EXPECT_EQ(round_to_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6 (even).
  EXPECT_EQ(round_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(round_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            1.0f + std::ldexp(1.0f, -7));  // above halfway: up
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_bf16(-0.0f), -0.0f);
  EXPECT_TRUE(std::signbit(round_to_bf16(-0.0f)));
}

TEST_F(Bf16Ops, LinearIsTheBf16KernelsForwardAndBackward) {
  Tensor x = leaf({6, 129}, 1), w = leaf({65, 129}, 2), b = leaf({65}, 3);  // 8385 weights
  Tensor y;
  {
    PrecisionScope p(Precision::BF16);
    y = nn::linear(x, w, b);
  }
  kernels::LinearShape s{6, 129, 65};
  std::vector<float> want(6 * 65), dx(6 * 129), dw(65 * 129);
  kernels::cpu::linear_forward_bf16(x.data<float>(), w.data<float>(), b.data<float>(), want.data(),
                                    s);
  EXPECT_EQ(y.to_vector(), want);
  Tensor dy = random_tensor({6, 65}, 4);
  y.backward(dy);  // after the scope ended: still bf16, as the forward ran
  kernels::cpu::linear_backward_data_bf16(dy.data<float>(), w.data<float>(), dx.data(), s);
  kernels::cpu::linear_backward_weight_bf16(dy.data<float>(), x.data<float>(), dw.data(), s, 0.f);
  EXPECT_EQ(x.grad().to_vector(), dx);
  EXPECT_EQ(w.grad().to_vector(), dw);
  Tensor y32 = nn::linear(x.detach(), w.detach(), b.detach());  // fp32 again outside the scope
  const double err = rel_error(y, y32);
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 1e-2);
}

TEST_F(Bf16Ops, Conv2dIsTheBf16KernelsForwardAndBackward) {
  Tensor x = leaf({3, 4, 9, 9}, 5), w = leaf({6, 4, 3, 3}, 6), b = leaf({6}, 7);
  Tensor y;
  {
    PrecisionScope p(Precision::BF16);
    y = nn::conv2d(x, w, b, 1, 1);
  }
  kernels::Conv2dShape s{3, 4, 9, 9, 6, 3, 3, 1, 1};
  std::vector<float> want(s.y_count()), dx(s.x_count()), dw(s.w_count()), db(6);
  kernels::cpu::conv2d_forward_bf16(x.data<float>(), w.data<float>(), b.data<float>(), want.data(),
                                    s);
  EXPECT_EQ(y.to_vector(), want);
  Tensor dy = random_tensor(y.shape(), 8);
  y.backward(dy);
  kernels::cpu::conv2d_backward_input_bf16(dy.data<float>(), w.data<float>(), dx.data(), s);
  kernels::cpu::conv2d_backward_weight_bf16(x.data<float>(), dy.data<float>(), dw.data(), db.data(),
                                            s, 0.f);
  EXPECT_EQ(x.grad().to_vector(), dx);
  EXPECT_EQ(w.grad().to_vector(), dw);
  EXPECT_EQ(b.grad().to_vector(), db);
  const double err = rel_error(y, nn::conv2d(x.detach(), w.detach(), b.detach(), 1, 1));
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 1e-2);
}

// A linear layer under 8192 weights or 16 outputs and a convolution of one input channel: fp32
// under BF16.
TEST_F(Bf16Ops, LayersBf16DoesNotSpeedUpStayFp32) {
  Tensor x = random_tensor({6, 128}, 11), w = random_tensor({63, 128}, 12),  // 8064 weights
      b = random_tensor({63}, 13);
  Tensor xh = random_tensor({6, 1568}, 19), wh = random_tensor({10, 1568}, 20),  // convnet.fc
      bh = random_tensor({10}, 21);
  const Tensor want_head = nn::linear(xh, wh, bh);
  Tensor img = random_tensor({2, 1, 12, 12}, 14), k = random_tensor({4, 1, 5, 5}, 15),
         kb = random_tensor({4}, 16);
  const Tensor want_fc = nn::linear(x, w, b), want_conv = nn::conv2d(img, k, kb, 1, 2);
  PrecisionScope p(Precision::BF16);
  EXPECT_EQ(nn::linear(x, w, b).to_vector(), want_fc.to_vector());
  EXPECT_EQ(nn::linear(xh, wh, bh).to_vector(), want_head.to_vector());
  EXPECT_EQ(nn::conv2d(img, k, kb, 1, 2).to_vector(), want_conv.to_vector());
  Tensor w2 = random_tensor({65, 128}, 17), b2 = random_tensor({65}, 18);  // 8320: bf16
  const Tensor fp32 = [&] {
    PrecisionScope q(Precision::F32);
    return nn::linear(x, w2, b2);
  }();
  EXPECT_GT(rel_error(nn::linear(x, w2, b2), fp32), 0.0);
}

TEST_F(Bf16Ops, OtherOpsStayFp32) {
  Tensor x = random_tensor({4, 10}, 9);
  Tensor want = nn::log_softmax(x);
  PrecisionScope p(Precision::BF16);
  EXPECT_EQ(nn::log_softmax(x).to_vector(), want.to_vector());
}

TEST_F(Bf16Ops, CudaMatchesTheCpu) {
  const Device dev = engine::testing::cuda_test_device();
  if (const std::string why = engine::testing::cuda_test_skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  PrecisionScope p(Precision::BF16);
  Tensor x = random_tensor({3, 4, 9, 9}, 10), w = random_tensor({6, 4, 3, 3}, 11);
  Tensor lw = random_tensor({30, 324}, 12);  // 9720 weights: bf16
  Tensor c = nn::conv2d(x, w, Tensor(), 1, 1);
  Tensor g = nn::conv2d(x.to(dev), w.to(dev), Tensor(), 1, 1);
  EXPECT_LT(rel_error(g, c), 1e-5);
  Tensor xl = random_tensor({8, 324}, 13);
  EXPECT_LT(rel_error(nn::linear(xl.to(dev), lw.to(dev), Tensor()), nn::linear(xl, lw, Tensor())),
            1e-5);
}

}  // namespace
}  // namespace engine
