// Tests of nn/functional: forward values on hand-worked cases, and the finite-difference gradient
// check of every op (the only one: kernel tests compare kernels with kernels/cpu/reference, device
// tests compare devices with the CPU). Tolerances as tight as the kernels' own checks were.
#include <gtest/gtest.h>

#include "core/autograd.h"
#include "core/error.h"
#include "nn/functional.h"
#include "tests/common/test_util.h"
#include "tests/nn/gradcheck.h"

using namespace engine;
using engine::testing::gradcheck;
using engine::testing::random_tensor;
using engine::testing::rel_error;

namespace {
Tensor leaf(const Shape& s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = random_tensor(s, seed, lo, hi);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Functional, LinearForwardByHand) {
  Tensor x = Tensor::from_vector({1, 2}, {1, 2});
  Tensor w = Tensor::from_vector({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor b = Tensor::from_vector({0.5, 0, -1}, {3});
  EXPECT_EQ(nn::linear(x, w, b).to_vector(), (std::vector<float>{1.5, 2, 2}));
}

TEST(Functional, LinearGrad) {
  auto f = [](auto& in) { return nn::linear(in[0], in[1], in[2]); };
  gradcheck(f, {leaf({3, 4}, 1), leaf({5, 4}, 2), leaf({5}, 3)}, 1e-2, 1e-3);
  gradcheck(f, {leaf({4, 6}, 7), leaf({5, 6}, 8), leaf({5}, 9)}, 1e-2, 1e-3);
}

TEST(Functional, Conv2dForwardByHand) {
  // 1x1x3x3 input, one 2x2 kernel of ones, stride 1, no padding: sums of 2x2 windows.
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = Tensor::full({1, 1, 2, 2}, 1.0f);
  Tensor b = Tensor::from_vector({1}, {1});
  EXPECT_EQ(nn::conv2d(x, w, b, 1, 0).to_vector(), (std::vector<float>{13, 17, 25, 29}));
  // Padding 1, stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1).
  EXPECT_EQ(nn::conv2d(x, w, b, 2, 1).to_vector(), (std::vector<float>{2, 6, 12, 29}));
}

TEST(Functional, Conv2dGrad) {
  auto s1p1 = [](auto& in) { return nn::conv2d(in[0], in[1], in[2], 1, 1); };
  auto s2p0 = [](auto& in) { return nn::conv2d(in[0], in[1], in[2], 2, 0); };
  auto s2p1 = [](auto& in) { return nn::conv2d(in[0], in[1], in[2], 2, 1); };
  gradcheck(s1p1, {leaf({2, 3, 5, 4}, 4), leaf({2, 3, 3, 3}, 5), leaf({2}, 6)}, 1e-2, 2e-3);
  gradcheck(s2p0, {leaf({1, 2, 7, 6}, 7), leaf({3, 2, 3, 3}, 8), leaf({3}, 9)}, 1e-2, 2e-3);
  // The direct AVX-512 path (stride 1) and im2col (stride 2) at the kernels' test shapes.
  gradcheck(s1p1, {leaf({2, 3, 6, 7}, 10), leaf({4, 3, 3, 3}, 11), leaf({4}, 12)}, 1e-2, 2e-3);
  gradcheck(s2p1, {leaf({2, 2, 7, 6}, 13), leaf({3, 2, 3, 3}, 14), leaf({3}, 15)}, 1e-2, 2e-3);
}

TEST(Functional, MaxPoolForwardAndGrad) {
  Tensor x = Tensor::from_vector({1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 1, 1, 9, 0, 1, 2}, {1, 1, 4, 4});
  EXPECT_EQ(nn::max_pool2d(x, 2, 2).to_vector(), (std::vector<float>{5, 8, 9, 2}));
  gradcheck([](auto& in) { return nn::max_pool2d(in[0], 2, 2); }, {leaf({2, 3, 6, 5}, 10)}, 1e-3);
  // Overlapping windows (k 3, stride 2): gradients sum where windows share their argmax. Distinct
  // values 0.01 apart, so that a step of 1e-3 never changes an argmax.
  const Shape s{2, 2, 7, 6};
  std::vector<float> v(shape_numel(s));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>((i * 37) % v.size());
  Tensor xo = Tensor::from_vector(v, s);
  xo.set_requires_grad(true);
  gradcheck([](auto& in) { return nn::max_pool2d(in[0], 3, 2); }, {xo}, 1e-3, 2e-3);
}

// The fused op against both unfused orders, values and input gradients, then by finite differences.
TEST(Functional, MaxPoolReluEqualsTheCompositionAndGrad) {
  for (int k : {2, 3}) {
    Tensor a = leaf({2, 3, 9, 7}, 21), b = leaf({2, 3, 9, 7}, 21), c = leaf({2, 3, 9, 7}, 21);
    Tensor r = random_tensor({2, 3, (9 - k) / 2 + 1, (7 - k) / 2 + 1}, 22);
    Tensor fused = nn::max_pool2d_relu(a, k, 2);
    Tensor pool_relu = nn::relu(nn::max_pool2d(b, k, 2));
    Tensor relu_pool = nn::max_pool2d(nn::relu(c), k, 2);
    EXPECT_EQ(fused.to_vector(), pool_relu.to_vector()) << "k " << k;
    EXPECT_EQ(fused.to_vector(), relu_pool.to_vector()) << "k " << k;
    fused.backward(r);
    pool_relu.backward(r);
    relu_pool.backward(r);
    EXPECT_EQ(a.grad().to_vector(), b.grad().to_vector()) << "k " << k;
    EXPECT_EQ(a.grad().to_vector(), c.grad().to_vector()) << "k " << k;
  }
  gradcheck([](auto& in) { return nn::max_pool2d_relu(in[0], 2, 2); }, {leaf({2, 3, 6, 5}, 23)},
            1e-3);
}

// conv2d_pool against conv2d then the pool: the same floats, forward and every gradient, at
// shapes that take the fused kernel (one input channel: column tiles of 16, 32 and 48, channel
// blocks of 12 and a rest) and at one that does not (3 input channels).
TEST(Functional, Conv2dPoolEqualsTheComposition) {
  struct Case {
    Shape x, w;
    int pad, k;
    bool relu;
  };
  const Case cases[] = {{{3, 1, 11, 9}, {5, 1, 3, 3}, 1, 2, true},
                        {{2, 1, 28, 28}, {13, 1, 5, 5}, 0, 2, true},
                        {{2, 1, 12, 40}, {32, 1, 3, 3}, 1, 3, false},
                        {{2, 3, 8, 8}, {4, 3, 3, 3}, 1, 2, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " " + shape_str(c.w));
    Tensor xa = leaf(c.x, 51), wa = leaf(c.w, 52, -0.3f, 0.3f), ba = leaf({c.w[0]}, 53);
    Tensor xb = leaf(c.x, 51), wb = leaf(c.w, 52, -0.3f, 0.3f), bb = leaf({c.w[0]}, 53);
    Tensor fused = nn::conv2d_pool(xa, wa, ba, 1, c.pad, c.k, 2, c.relu);
    Tensor h = nn::conv2d(xb, wb, bb, 1, c.pad);
    Tensor two = c.relu ? nn::max_pool2d_relu(h, c.k, 2) : nn::max_pool2d(h, c.k, 2);
    EXPECT_EQ(fused.to_vector(), two.to_vector());
    Tensor r = random_tensor(fused.shape(), 54);
    fused.backward(r);
    two.backward(r);
    EXPECT_EQ(xa.grad().to_vector(), xb.grad().to_vector());
    EXPECT_EQ(wa.grad().to_vector(), wb.grad().to_vector());
    EXPECT_EQ(ba.grad().to_vector(), bb.grad().to_vector());
  }
  // An input that needs no gradient (a first layer, as in the models).
  for (const Case& c : cases) {
    SCOPED_TRACE("x constant: " + shape_str(c.x) + " " + shape_str(c.w));
    Tensor x = random_tensor(c.x, 55);
    Tensor wa = leaf(c.w, 56, -0.3f, 0.3f), ba = leaf({c.w[0]}, 57);
    Tensor wb = leaf(c.w, 56, -0.3f, 0.3f), bb = leaf({c.w[0]}, 57);
    Tensor fused = nn::conv2d_pool(x, wa, ba, 1, c.pad, c.k, 2, c.relu);
    Tensor h = nn::conv2d(x, wb, bb, 1, c.pad);
    Tensor two = c.relu ? nn::max_pool2d_relu(h, c.k, 2) : nn::max_pool2d(h, c.k, 2);
    Tensor r = random_tensor(fused.shape(), 58);
    fused.backward(r);
    two.backward(r);
    EXPECT_LE(engine::testing::rel_error(wa.grad(), wb.grad()), 1e-5);
    EXPECT_LE(engine::testing::rel_error(ba.grad(), bb.grad()), 1e-5);
  }
  EXPECT_THROW(nn::conv2d_pool(Tensor::zeros({1, 1, 3, 3}), Tensor::zeros({2, 1, 3, 3}),
                               Tensor::zeros({2}), 1, 0, 2, 2, true),
               Error);
}

TEST(Functional, ReluForwardAndGrad) {
  Tensor x = Tensor::from_vector({-1, 0.5, 2, -3}, {4});
  EXPECT_EQ(nn::relu(x).to_vector(), (std::vector<float>{0, 0.5, 2, 0}));
  gradcheck([](auto& in) { return nn::relu(in[0]); }, {leaf({3, 7}, 11)}, 1e-3);
}

TEST(Functional, LogSoftmaxNllAndCrossEntropy) {
  Tensor x = Tensor::from_vector({0, 0, 0, 0}, {2, 2});
  std::vector<float> y = nn::log_softmax(x).to_vector();
  for (float v : y) EXPECT_NEAR(v, -0.693147f, 1e-6);
  Tensor target = Tensor::from_vector_i64({1, 0}, {2});
  EXPECT_NEAR(nn::cross_entropy(x, target).item(), 0.693147f, 1e-6);
  Tensor logp = Tensor::from_vector({-1, -2, -3, -4}, {2, 2});
  EXPECT_FLOAT_EQ(nn::nll_loss(logp, target).item(), 2.5f);  // (2 + 3) / 2
  Tensor t3 = Tensor::from_vector_i64({2, 0, 4}, {3});
  gradcheck([&](auto& in) { return nn::log_softmax(in[0]); }, {leaf({3, 5}, 12)});
  gradcheck([&](auto& in) { return nn::cross_entropy(in[0], t3); }, {leaf({3, 5}, 13)});
  Tensor t6 = Tensor::from_vector_i64({3, 0, 6, 1, 5, 2}, {6});
  gradcheck([&](auto& in) { return nn::cross_entropy(in[0], t6); }, {leaf({6, 7}, 20, -3.f, 3.f)},
            1e-2, 2e-4);
  EXPECT_THROW(nn::nll_loss(logp, Tensor::from_vector_i64({0, 2}, {2})), Error);
}

TEST(Functional, BatchNormTrainEvalAndGrad) {
  Tensor x = Tensor::from_vector({1, 3, 5, 7}, {4, 1, 1, 1});
  Tensor g = Tensor::full({1}, 1.0f), b = Tensor::zeros({1});
  Tensor rm = Tensor::zeros({1}), rv = Tensor::full({1}, 1.0f);
  std::vector<float> y = nn::batch_norm2d(x, g, b, rm, rv, true).to_vector();
  // mean 4, biased var 5: (x - 4) / sqrt(5 + 1e-5)
  EXPECT_NEAR(y[0], -3 / std::sqrt(5.00001f), 1e-5);
  EXPECT_NEAR(rm.item(), 0.4f, 1e-6);                  // 0.1 * 4
  EXPECT_NEAR(rv.item(), 0.9f + 0.1f * 20 / 3, 1e-5);  // unbiased var 20/3
  std::vector<float> e = nn::batch_norm2d(x, g, b, rm, rv, false).to_vector();
  EXPECT_NEAR(e[0], (1 - 0.4f) / std::sqrt(rv.item() + 1e-5f), 1e-5);
  Tensor rm2 = Tensor::zeros({3}), rv2 = Tensor::full({3}, 1.0f);
  gradcheck([&](auto& in) { return nn::batch_norm2d(in[0], in[1], in[2], rm2, rv2, true); },
            {leaf({4, 3, 2, 3}, 14), leaf({3}, 15), leaf({3}, 16)}, 1e-2, 3e-2);
  // The kernels' shapes (N, C, HW as H x W). With two values per channel dx is ~0 and its finite
  // differences noise: that input is constant there.
  const Shape shapes[] = {{4, 3, 5, 5}, {2, 5, 1, 1}, {1, 2, 3, 3}, {7, 16, 7, 7}};
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(shape_str(sh));
    Tensor xs = leaf(sh, 21, -2.f, 2.f);
    if (sh[0] * sh[2] * sh[3] <= 2) xs.set_requires_grad(false);
    Tensor rm = Tensor::zeros({sh[1]}), rv = Tensor::full({sh[1]}, 1.0f);
    gradcheck([&](auto& in) { return nn::batch_norm2d(in[0], in[1], in[2], rm, rv, true); },
              {xs, leaf({sh[1]}, 22, 0.5f, 1.5f), leaf({sh[1]}, 23)}, 1e-2, 2e-2);
  }
}

// batch_norm2d_pool against batch_norm2d then the pool: train and eval, with and without relu,
// 2x2 windows and overlapping 3x3 ones (stride 2), odd sizes; values, running statistics and
// every gradient, then by finite differences.
TEST(Functional, BatchNormPoolEqualsTheCompositionAndGrad) {
  for (bool relu : {false, true})
    for (int k : {2, 3}) {
      SCOPED_TRACE(::testing::Message() << "relu " << relu << " k " << k);
      const Shape sh{3, 4, 9, 7};
      Tensor xa = leaf(sh, 31, -2.f, 2.f), xb = leaf(sh, 31, -2.f, 2.f);
      Tensor ga = leaf({4}, 32, -1.5f, 1.5f), gb = leaf({4}, 32, -1.5f, 1.5f);  // negative too
      Tensor ba = leaf({4}, 33), bb = leaf({4}, 33);
      Tensor rma = Tensor::zeros({4}), rva = Tensor::full({4}, 1.f);
      Tensor rmb = Tensor::zeros({4}), rvb = Tensor::full({4}, 1.f);
      Tensor fused = nn::batch_norm2d_pool(xa, ga, ba, rma, rva, true, k, 2, relu);
      Tensor h = nn::batch_norm2d(xb, gb, bb, rmb, rvb, true);
      Tensor two = relu ? nn::max_pool2d_relu(h, k, 2) : nn::max_pool2d(h, k, 2);
      EXPECT_LE(rel_error(fused, two), 1e-6);
      EXPECT_EQ(rma.to_vector(), rmb.to_vector());
      EXPECT_EQ(rva.to_vector(), rvb.to_vector());
      Tensor r = random_tensor(fused.shape(), 34);
      fused.backward(r);
      two.backward(r);
      EXPECT_LE(rel_error(xa.grad(), xb.grad()), 1e-5);
      EXPECT_LE(rel_error(ga.grad(), gb.grad()), 1e-5);
      EXPECT_LE(rel_error(ba.grad(), bb.grad()), 1e-5);
      Tensor eval_fused = nn::batch_norm2d_pool(xa, ga, ba, rma, rva, false, k, 2, relu);
      Tensor he = nn::batch_norm2d(xb, gb, bb, rmb, rvb, false);
      EXPECT_EQ(eval_fused.to_vector(),
                (relu ? nn::max_pool2d_relu(he, k, 2) : nn::max_pool2d(he, k, 2)).to_vector());
    }
  // Distinct values 0.05 apart, so that a step of 1e-3 never changes an argmax (normalising is
  // monotone in each channel).
  const Shape s{4, 3, 4, 6};
  std::vector<float> v(shape_numel(s));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * static_cast<float>((i * 37) % v.size());
  Tensor rm = Tensor::zeros({3}), rv = Tensor::full({3}, 1.0f);
  for (bool relu : {false, true}) {
    Tensor x = Tensor::from_vector(v, s);
    x.set_requires_grad(true);
    gradcheck(
        [&](auto& in) {
          return nn::batch_norm2d_pool(in[0], in[1], in[2], rm, rv, true, 2, 2, relu);
        },
        {x, leaf({3}, 36, 0.5f, 1.5f), leaf({3}, 37)}, 1e-3, 3e-2);
  }
  Tensor small = Tensor::zeros({2, 3, 1, 1});
  EXPECT_THROW(nn::batch_norm2d_pool(small, rm, rm, rm, rv, true, 2, 2, true), Error);
}

TEST(Functional, DropoutMaskScaleAndGrad) {
  Generator gen(5);
  Tensor x = Tensor::full({10000}, 1.0f);
  std::vector<float> y = nn::dropout(x, 0.25f, true, gen).to_vector();
  int zeros = 0;
  for (float v : y) {
    if (v == 0)
      ++zeros;
    else
      EXPECT_FLOAT_EQ(v, 1 / 0.75f);
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.02);
  EXPECT_TRUE(nn::dropout(x, 0.5f, false, gen).same(x));  // eval: identity
  // The same (seed, offset) gives the same mask: replay the generator for the gradient check.
  gradcheck(
      [](auto& in) {
        Generator g(7);
        return nn::dropout(in[0], 0.5f, true, g);
      },
      {leaf({4, 6}, 17)}, 1e-3);
  gradcheck(
      [](auto& in) {
        Generator g(8);
        return nn::dropout2d(in[0], 0.5f, true, g);
      },
      {leaf({2, 3, 2, 2}, 18)}, 1e-3);
  Tensor x4 = Tensor::full({2, 8, 3, 3}, 1.0f);
  std::vector<float> d2 = nn::dropout2d(x4, 0.5f, true, gen).to_vector();
  for (int plane = 0; plane < 16; ++plane)
    for (int i = 1; i < 9; ++i) EXPECT_EQ(d2[plane * 9 + i], d2[plane * 9]) << "plane " << plane;
}

TEST(Functional, ReshapeAndFlattenGrad) {
  Tensor x = leaf({2, 3, 4}, 19);
  EXPECT_EQ(nn::reshape(x, {-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(nn::flatten(x).shape(), (Shape{2, 12}));
  EXPECT_THROW(nn::reshape(x, {5, -1}), Error);
  gradcheck([](auto& in) { return nn::log_softmax(nn::flatten(in[0])); }, {x});
}

TEST(Functional, ArgmaxAndAccuracy) {
  Tensor s = Tensor::from_vector({0.1f, 0.9f, 0.5f, 0.2f, 3, 3}, {3, 2});
  EXPECT_EQ(nn::argmax(s).to_vector_i64(), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(nn::correct_count(s, Tensor::from_vector_i64({1, 1, 0}, {3})), 2);
}

TEST(Functional, ShapeErrorsNameTheProblem) {
  try {
    nn::linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), Tensor());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
  }
}
