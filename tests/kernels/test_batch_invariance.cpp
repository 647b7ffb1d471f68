// tests/kernels/test_batch_invariance.cpp: batch invariance of the CPU kernels over the seed
// models' layers (nn/models.cpp), as the world-invariant mode needs it (issue 35): a sample's
// outputs and input gradients have the same bits whatever the batch it comes in, where its share
// starts and the thread count; a chunk of 16 samples' weight and bias gradients likewise whatever
// the chunk's place in the batch tensor (batch_invariance.h says how). Two tests show that the
// comparison sees what it must: a chunk's gradient summed in two blocks of 8, and the default bf16
// linear layer, which takes another path at 16 samples than at 128. Dropout by global position:
// test_dropout_global.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/softmax.h"
#include "kernels/testing/sites.h"
#include "tests/common/test_util.h"
#include "tests/kernels/batch_invariance.h"

namespace engine::kernels {
namespace {

using engine::testing::BitDiff;
using engine::testing::blocked_chunk_difference;
using engine::testing::expect_chunk_invariant;
using engine::testing::expect_per_sample_invariant;
using engine::testing::filled;
using engine::testing::per_sample_difference;
using In = std::vector<const float*>;
using Out = std::vector<float*>;

// The seed models' layers (kernels/testing/sites.h), N set per call.
std::vector<LinearShape> linears() {
  std::vector<LinearShape> v;
  for (const auto& l : testing::linear_sites()) v.push_back({0, l.in, l.out});
  return v;
}
std::vector<Conv2dShape> convs() {
  std::vector<Conv2dShape> v;
  for (const auto& c : testing::conv_sites())
    v.push_back({0, c.c_in, c.h, c.w, c.c_out, c.k, c.k, 1, c.pad});
  return v;
}

std::string name(const LinearShape& s) {
  return "linear " + std::to_string(s.in) + " -> " + std::to_string(s.out);
}
std::string name(const Conv2dShape& s) {
  return "conv " + std::to_string(s.c_in) + " -> " + std::to_string(s.c_out) + " k" +
         std::to_string(s.kh) + " p" + std::to_string(s.pad) + " on " + std::to_string(s.h);
}
LinearShape at(LinearShape s, int64_t n) {
  s.n = n;
  return s;
}
Conv2dShape at(Conv2dShape s, int64_t n) {
  s.n = n;
  return s;
}
int64_t out_plane(const Conv2dShape& s) {
  return s.c_out * s.oh() * s.ow();
}

// A forward (y from x, w, b) and an input gradient (dx from dy, w) of one layer kind: the fp32
// kernels or the bf16 invariant ones.
template <class Shape>
struct Passes {
  void (*forward)(const float*, const float*, const float*, float*, const Shape&);
  void (*input_grad)(const float*, const float*, float*, const Shape&);
};

void expect_linears_invariant(const std::vector<LinearShape>& shapes, Passes<LinearShape> p) {
  for (const LinearShape& s : shapes) {
    SCOPED_TRACE(name(s));
    const auto w = filled(s.out * s.in, 7), b = filled(s.out, 8);
    expect_per_sample_invariant({{s.in}, {s.out}}, [&](const In& in, const Out& out, int64_t n) {
      p.forward(in[0], w.data(), b.data(), out[0], at(s, n));
    });
    expect_per_sample_invariant({{s.out}, {s.in}}, [&](const In& in, const Out& out, int64_t n) {
      p.input_grad(in[0], w.data(), out[0], at(s, n));
    });
  }
}

// A first layer's input gradient is not taken: its forward only.
void expect_convs_invariant(const std::vector<Conv2dShape>& shapes, Passes<Conv2dShape> p) {
  for (const Conv2dShape& s : shapes) {
    SCOPED_TRACE(name(s));
    const auto w = filled(s.w_count(), 7), b = filled(s.c_out, 8);
    const int64_t xs = s.c_in * s.h * s.w, ys = out_plane(s);
    expect_per_sample_invariant({{xs}, {ys}}, [&](const In& in, const Out& out, int64_t n) {
      p.forward(in[0], w.data(), b.data(), out[0], at(s, n));
    });
    if (s.c_in == 1) continue;
    expect_per_sample_invariant({{ys}, {xs}}, [&](const In& in, const Out& out, int64_t n) {
      p.input_grad(in[0], w.data(), out[0], at(s, n));
    });
  }
}

TEST(BatchInvariance, LinearForwardAndInputGradient) {
  expect_linears_invariant(linears(), {cpu::linear_forward, cpu::linear_backward_data});
}

TEST(BatchInvariance, LinearWeightAndBiasGradientOfAChunk) {
  for (const LinearShape& s : linears()) {
    SCOPED_TRACE(name(s));
    expect_chunk_invariant({s.out, s.in}, s.out * s.in + s.out,
                           [&](const In& in, float* g, int64_t n) {
                             cpu::linear_backward_weight(in[0], in[1], g, at(s, n), 0.f);
                             cpu::linear_backward_bias(in[0], g + s.out * s.in, at(s, n), 0.f);
                           });
  }
}

TEST(BatchInvariance, ConvForwardAndInputGradient) {
  expect_convs_invariant(convs(), {cpu::conv2d_forward, cpu::conv2d_backward_input});
}

TEST(BatchInvariance, ConvWeightAndBiasGradientOfAChunk) {
  for (const Conv2dShape& s : convs()) {
    SCOPED_TRACE(name(s));
    expect_chunk_invariant({s.c_in * s.h * s.w, out_plane(s)}, s.w_count() + s.c_out,
                           [&](const In& in, float* g, int64_t n) {
                             cpu::conv2d_backward_weight(in[0], in[1], g, g + s.w_count(), at(s, n),
                                                         0.f);
                           });
  }
}

// The first layers' convolution pooled in cache (simplecnn's and net's conv1): values and argmax.
TEST(BatchInvariance, ConvPooledForward) {
  for (const Conv2dShape& s : convs()) {
    if (s.c_in != 1) continue;
    SCOPED_TRACE(name(s));
    if (!cpu::conv2d_pool_supported(s)) GTEST_SKIP() << "conv2d_pool needs AVX-512";
    const auto w = filled(s.w_count(), 7), b = filled(s.c_out, 8);
    const int64_t ph = s.oh() / 2, pw = s.ow() / 2, per = s.c_out * ph * pw;
    expect_per_sample_invariant({{s.c_in * s.h * s.w}, {per, per}}, [&](const In& in,
                                                                        const Out& out, int64_t n) {
      std::vector<int32_t> arg(static_cast<size_t>(n * per));
      const Pool2dShape ps{n, s.c_out, s.oh(), s.ow(), 2, 2};
      cpu::conv2d_pool_forward(in[0], w.data(), b.data(), out[0], arg.data(), at(s, n), ps, true);
      for (int64_t i = 0; i < n * per; ++i) out[1][i] = static_cast<float>(arg[i]);
    });
  }
}

// Max pooling (plain, with relu, with batch norm's affine) forward and backward at the models'
// pools.
TEST(BatchInvariance, PoolingForwardAndBackward) {
  for (const auto& site : testing::pool_sites()) {
    Pool2dShape s{0, site.c, site.h, site.w};
    SCOPED_TRACE("pool of " + std::to_string(s.c) + " planes of " + std::to_string(s.h));
    const int64_t xs = s.c * s.h * s.w, ys = s.c * s.oh() * s.ow();
    const auto alpha = filled(s.c, 5), shift = filled(s.c, 6);
    expect_per_sample_invariant(
        {{xs, ys}, {ys, ys, xs, xs}}, [&](const In& in, const Out& out, int64_t n) {
          s.n = n;
          std::vector<int32_t> arg(static_cast<size_t>(n * ys));
          cpu::max_pool2d_forward(in[0], out[0], arg.data(), s);
          cpu::max_pool2d_backward(in[1], arg.data(), out[2], s);
          cpu::max_pool2d_affine_forward(in[0], alpha.data(), shift.data(), out[1], arg.data(), s,
                                         true);
          cpu::max_pool2d_relu_backward(in[1], out[1], arg.data(), out[3], s);
        });
  }
}

TEST(BatchInvariance, BatchNormInEvalMode) {
  for (const auto& site : testing::batchnorm_sites()) {
    BatchNormShape s{0, site.c, site.h * site.w};
    const int64_t per = s.c * s.hw;
    const auto gamma = filled(s.c, 5), beta = filled(s.c, 6), mean = filled(s.c, 7);
    const auto var = filled(s.c, 8, 0.5f, 2.f);
    expect_per_sample_invariant(
        {{per, per}, {per, per}}, [&](const In& in, const Out& out, int64_t n) {
          s.n = n;
          cpu::batch_norm_eval_forward(in[0], gamma.data(), beta.data(), mean.data(), var.data(),
                                       out[0], s, 1e-5f);
          cpu::batch_norm_eval_backward(in[1], in[0], gamma.data(), mean.data(), var.data(), out[1],
                                        nullptr, nullptr, s, 1e-5f);
        });
  }
}

TEST(BatchInvariance, Relu) {
  for (const auto& site : testing::relu_sites()) {
    const int64_t per = site.per_sample();
    expect_per_sample_invariant({{per, per}, {per, per}},
                                [&](const In& in, const Out& out, int64_t n) {
                                  cpu::relu_forward(in[0], out[0], n * per);
                                  cpu::relu_backward(in[1], in[0], out[1], n * per);
                                });
  }
}

// log_softmax forward and backward, the loss per sample and the loss gradients at the global
// batch's scale (1/128, whatever the call's N), on the 10-class heads.
TEST(BatchInvariance, SoftmaxAndTheLossPerSample) {
  constexpr int64_t c = testing::kClasses;
  const float scale = 1.f / 128;
  engine::testing::SampleLayout l{{c, c, 1}, {c, c, 1, c, c}};
  l.target_input = 2, l.classes = c;
  expect_per_sample_invariant(l, [&](const In& in, const Out& out, int64_t n) {
    std::vector<int64_t> t(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int64_t>(in[2][i]);
    cpu::log_softmax_forward(in[0], out[0], n, c);
    cpu::log_softmax_backward(in[1], out[0], out[1], n, c);
    cpu::nll_loss_per_sample(out[0], t.data(), out[2], n, c);
    cpu::nll_loss_backward_scaled(scale, t.data(), out[3], n, c);
    cpu::cross_entropy_backward_scaled(scale, out[0], t.data(), out[4], n, c);
  });
}

// The scaled forms are the default ones where the scale is dloss / N.
TEST(BatchInvariance, ScaledLossGradientsAreTheDefaultAtTheCallsN) {
  constexpr int64_t n = 48, c = 10;
  const auto x = filled(n * c, 1);
  std::vector<int64_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = (i * 7) % c;
  std::vector<float> logp(n * c), a(n * c), b(n * c);
  cpu::log_softmax_forward(x.data(), logp.data(), n, c);
  const float dloss = 0.7f;
  cpu::cross_entropy_backward(dloss, logp.data(), t.data(), a.data(), n, c);
  cpu::cross_entropy_backward_scaled(dloss / n, logp.data(), t.data(), b.data(), n, c);
  EXPECT_EQ(a, b);
  cpu::nll_loss_backward(&dloss, t.data(), a.data(), n, c);
  cpu::nll_loss_backward_scaled(dloss / n, t.data(), b.data(), n, c);
  EXPECT_EQ(a, b);
  float mean = 0;
  cpu::nll_loss_forward(logp.data(), t.data(), &mean, n, c);
  cpu::nll_loss_per_sample(logp.data(), t.data(), a.data(), n, c);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i];
  EXPECT_EQ(mean, static_cast<float>(sum / n));
}

// The comparisons see a change of summation order: a chunk's weight gradient summed as two
// blocks of 8 samples (a split of the batch over threads or ranks) differs from one call's.
TEST(BatchInvariance, ABlockedSumOverTheBatchIsCaught) {
  const LinearShape l = linears()[0];  // simplecnn's fc1
  const auto linear = [&](float beta) {
    return [&, beta](const In& in, float* g, int64_t n) {
      cpu::linear_backward_weight(in[0], in[1], g, at(l, n), beta);
    };
  };
  BitDiff d = blocked_chunk_difference({l.out, l.in}, l.out * l.in, linear(0.f), linear(1.f));
  EXPECT_GT(d.count, 0) << name(l);
  const Conv2dShape s = convs()[1];  // simplecnn's conv2
  const auto conv = [&](float beta) {
    return [&, beta](const In& in, float* g, int64_t n) {
      cpu::conv2d_backward_weight(in[0], in[1], g, nullptr, at(s, n), beta);
    };
  };
  d = blocked_chunk_difference({s.c_in * s.h * s.w, out_plane(s)}, s.w_count(), conv(0.f),
                               conv(1.f));
  EXPECT_GT(d.count, 0) << name(s);
}

bool skip_bf16() {
  return !cpu::has_avx512_bf16();
}
#define ENGINE_NEEDS_BF16() \
  if (skip_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16: the bf16 kernels cannot run"

// The layers bf16 precision runs in bf16 (nn/functional.cpp's runs_in_bf16): linear layers of
// 16 outputs and 8192 weights or more (simplecnn's and net's fc1), convolutions of more than one
// input channel.
std::vector<LinearShape> bf16_linears() {
  std::vector<LinearShape> v;
  for (const LinearShape& s : linears())
    if (s.out >= 16 && s.in * s.out >= 8192) v.push_back(s);
  return v;
}
std::vector<Conv2dShape> bf16_convs() {
  std::vector<Conv2dShape> v;
  for (const Conv2dShape& s : convs())
    if (s.c_in > 1) v.push_back(s);
  return v;
}

TEST(BatchInvariance, Bf16InvariantLinearForwardAndInputGradient) {
  ENGINE_NEEDS_BF16();
  expect_linears_invariant(bf16_linears(), {cpu::linear_forward_bf16_invariant,
                                            cpu::linear_backward_data_bf16_invariant});
}

// The default bf16 linear layer takes the rounding reference below 2^18 multiply-adds: net's fc1
// at 16 samples, not at 128. That is what the invariant entry points are for.
TEST(BatchInvariance, Bf16DefaultLinearDependsOnTheBatch) {
  ENGINE_NEEDS_BF16();
  const LinearShape s = linears()[3];  // net's fc1, 320 -> 50
  const auto w = filled(s.out * s.in, 7), b = filled(s.out, 8);
  const BitDiff d =
      per_sample_difference({{s.in}, {s.out}}, [&](const In& in, const Out& out, int64_t n) {
        cpu::linear_forward_bf16(in[0], w.data(), b.data(), out[0], at(s, n));
      });
  EXPECT_GT(d.count, 0) << name(s);
}

TEST(BatchInvariance, Bf16InvariantConvForwardAndInputGradient) {
  ENGINE_NEEDS_BF16();
  expect_convs_invariant(bf16_convs(), {cpu::conv2d_forward_bf16_invariant,
                                        cpu::conv2d_backward_input_bf16_invariant});
}

// The default bf16 weight gradients are invariant per chunk: a chunk of 16 always takes the
// same path.
TEST(BatchInvariance, Bf16WeightGradientsOfAChunk) {
  ENGINE_NEEDS_BF16();
  for (const LinearShape& s : bf16_linears()) {
    SCOPED_TRACE(name(s));
    expect_chunk_invariant({s.out, s.in}, s.out * s.in, [&](const In& in, float* g, int64_t n) {
      cpu::linear_backward_weight_bf16(in[0], in[1], g, at(s, n), 0.f);
    });
  }
  for (const Conv2dShape& s : bf16_convs()) {
    SCOPED_TRACE(name(s));
    expect_chunk_invariant({s.c_in * s.h * s.w, out_plane(s)}, s.w_count() + s.c_out,
                           [&](const In& in, float* g, int64_t n) {
                             cpu::conv2d_backward_weight_bf16(in[0], in[1], g, g + s.w_count(),
                                                              at(s, n), 0.f);
                           });
  }
}

}  // namespace
}  // namespace engine::kernels
