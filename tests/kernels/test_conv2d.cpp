// tests/kernels/test_conv2d.cpp: conv2d (every algorithm) without a bias, beta, determinism,
// workspace checks. Against the reference on the models' and awkward shapes (with a NaN workspace):
// the kernel-case table (kernels/testing/table.h). Finite differences:
// tests/nn/test_functional.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/reference.h"
#include "tests/common/test_util.h"
#include "tests/common/thread_guard.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;

using cpu::ConvAlgo;
using cpu::ConvPass;

struct Grads {
  std::vector<float> y, dx, dw, db;
};

Grads run(const Conv2dShape& s, ConvAlgo algo, const std::vector<float>& x,
          const std::vector<float>& w, const float* b, const std::vector<float>& dy) {
  Grads g{std::vector<float>(s.y_count()), std::vector<float>(s.x_count()),
          std::vector<float>(s.w_count()), std::vector<float>(s.c_out)};
  if (!cpu::conv2d_algo_supported(s, algo, ConvPass::Forward)) return g;
  // NaN workspace: a kernel that reads workspace it did not write shows up in the results.
  std::vector<float> ws(cpu::conv2d_workspace_count(s, algo), std::nanf(""));
  const int64_t n = static_cast<int64_t>(ws.size());
  if (cpu::conv2d_algo_supported(s, algo, ConvPass::Forward))
    cpu::conv2d_forward(x.data(), w.data(), b, g.y.data(), s, ws.data(), n, algo);
  if (cpu::conv2d_algo_supported(s, algo, ConvPass::BackwardInput))
    cpu::conv2d_backward_input(dy.data(), w.data(), g.dx.data(), s, ws.data(), n, algo);
  if (cpu::conv2d_algo_supported(s, algo, ConvPass::BackwardWeight))
    cpu::conv2d_backward_weight(x.data(), dy.data(), g.dw.data(), g.db.data(), s, 0.f, ws.data(), n,
                                algo);
  return g;
}

const ConvAlgo kAlgos[] = {ConvAlgo::Auto, ConvAlgo::Flat, ConvAlgo::ChannelVector,
                           ConvAlgo::Im2col};

TEST(Conv2d, NoBias) {
  const Conv2dShape s{2, 3, 8, 8, 5, 3, 3, 1, 1};
  auto x = filled(s.x_count(), 5), w = filled(s.w_count(), 6), dy = filled(s.y_count(), 7);
  std::vector<float> y(s.y_count());
  ref::conv2d_forward(x.data(), w.data(), nullptr, y.data(), s);
  for (ConvAlgo algo : kAlgos) {
    Grads g = run(s, algo, x, w, nullptr, dy);
    if (cpu::conv2d_algo_supported(s, algo, ConvPass::Forward)) {
      EXPECT_LT(ref::max_rel_error(g.y.data(), y.data(), s.y_count()), 2e-5);
    }
  }
}

TEST(Conv2d, BackwardBiasAndBeta) {
  const Conv2dShape s{3, 4, 6, 7, 6, 3, 3, 1, 1};
  auto x = filled(s.x_count(), 8), dy = filled(s.y_count(), 9);
  std::vector<float> dw_ref(s.w_count()), db_ref(s.c_out);
  ref::conv2d_backward_weight(x.data(), dy.data(), dw_ref.data(), s);
  ref::conv2d_backward_bias(dy.data(), db_ref.data(), s);
  for (ConvAlgo algo : kAlgos) {
    if (!cpu::conv2d_algo_supported(s, algo, ConvPass::BackwardWeight)) continue;
    std::vector<float> ws(cpu::conv2d_workspace_count(s, algo));
    std::vector<float> dw(s.w_count(), 0.5f), db(s.c_out, -0.25f), db2(s.c_out, 2.f);
    cpu::conv2d_backward_weight(x.data(), dy.data(), dw.data(), db.data(), s, 1.f, ws.data(),
                                static_cast<int64_t>(ws.size()), algo);
    cpu::conv2d_backward_bias(dy.data(), db2.data(), s, 0.f);
    for (int64_t i = 0; i < s.w_count(); ++i) EXPECT_NEAR(dw[i], dw_ref[i] + 0.5f, 1e-4);
    for (int64_t i = 0; i < s.c_out; ++i) {
      EXPECT_NEAR(db[i], db_ref[i] - 0.25f, 1e-4);
      EXPECT_NEAR(db2[i], db_ref[i], 1e-4);
    }
  }
}

TEST(Conv2d, DeterministicAcrossRunsAndThreadCounts) {
  const Conv2dShape s{13, 8, 12, 11, 16, 3, 3, 1, 1};
  auto x = filled(s.x_count(), 20), w = filled(s.w_count(), 21), b = filled(s.c_out, 22);
  auto dy = filled(s.y_count(), 23);
  for (ConvAlgo algo : kAlgos) {
    Grads one, two, two_again;
    {
      engine::testing::ThreadCount t(1);
      one = run(s, algo, x, w, b.data(), dy);
    }
    {
      engine::testing::ThreadCount t(2);
      two = run(s, algo, x, w, b.data(), dy);
      two_again = run(s, algo, x, w, b.data(), dy);
    }
    EXPECT_EQ(two.y, two_again.y);
    EXPECT_EQ(two.dx, two_again.dx);
    EXPECT_EQ(two.dw, two_again.dw);
    EXPECT_EQ(two.db, two_again.db);
    // Forward and backward-input split samples; backward-weight sums fixed chunks in order: the
    // bits do not depend on the thread count either.
    EXPECT_EQ(one.y, two.y);
    EXPECT_EQ(one.dx, two.dx);
    EXPECT_EQ(one.dw, two.dw);
    EXPECT_EQ(one.db, two.db);
  }
}

// Auto's forward of x with Cin 1 (a first layer: conv2d/direct_one_channel.cpp), with a NaN
// workspace.
std::vector<float> forward_auto(const Conv2dShape& s, const std::vector<float>& x,
                                const std::vector<float>& w, const float* b) {
  std::vector<float> y(s.y_count(), std::nanf(""));
  std::vector<float> ws(cpu::conv2d_workspace_count(s), std::nanf(""));
  cpu::conv2d_forward(x.data(), w.data(), b, y.data(), s, ws.data(),
                      static_cast<int64_t>(ws.size()));
  return y;
}

// One input channel, widths 1..40 (tails of every length), KH != KW, pad 0..k-1, Cout 1..33,
// batch 1 and more, with and without a bias; and rows wider than a tile (48 columns), KW > 16.
TEST(Conv2d, OneInputChannelMatchesReference) {
  const int64_t kK[][2] = {{3, 3}, {5, 5}, {1, 3}, {3, 1}, {2, 5}, {5, 2}, {4, 7}, {1, 1}};
  const int64_t kCout[] = {1, 2, 5, 8, 10, 12, 13, 16, 24, 25, 32, 33};
  std::vector<Conv2dShape> shapes;
  for (int64_t w = 1; w <= 40; ++w) {
    const int64_t kh = kK[w % 8][0], kw = kK[w % 8][1];
    const int64_t h = 1 + (w * 7) % 9, pad = w % std::min(kh, kw);
    shapes.push_back({1 + w % 3, 1, h, w, kCout[w % 12], kh, kw, 1, pad});
  }
  shapes.push_back({2, 1, 28, 28, 32, 3, 3, 1, 1});  // simplecnn.conv1
  shapes.push_back({3, 1, 28, 28, 16, 5, 5, 1, 2});  // convnet.layer1.0
  shapes.push_back({2, 1, 28, 28, 10, 5, 5, 1, 0});  // net.conv1
  shapes.push_back({2, 1, 9, 70, 13, 3, 5, 1, 2});   // two column tiles, the second of 22
  shapes.push_back({1, 1, 6, 100, 33, 2, 3, 1, 1});  // three column tiles
  shapes.push_back({2, 1, 5, 20, 3, 2, 17, 1, 1});   // KW > 16: the flat kernel
  for (const Conv2dShape& s : shapes) {
    if (s.oh() <= 0 || s.ow() <= 0) continue;
    SCOPED_TRACE(::testing::Message()
                 << "n " << s.n << " h " << s.h << " w " << s.w << " cout " << s.c_out << " k "
                 << s.kh << "x" << s.kw << " pad " << s.pad);
    auto x = filled(s.x_count(), 30), w = filled(s.w_count(), 31), b = filled(s.c_out, 32);
    const float* biases[] = {nullptr, b.data()};
    for (const float* bias : biases) {
      std::vector<float> want(s.y_count());
      ref::conv2d_forward(x.data(), w.data(), bias, want.data(), s);
      std::vector<float> one, two;
      {
        engine::testing::ThreadCount t(1);
        one = forward_auto(s, x, w, bias);
      }
      {
        engine::testing::ThreadCount t(2);
        two = forward_auto(s, x, w, bias);
      }
      EXPECT_LT(ref::max_rel_error(one.data(), want.data(), s.y_count()), 2e-5);
      EXPECT_EQ(one, two);  // NaN-free too: a NaN never compares equal
    }
  }
}

TEST(Conv2d, RejectsSmallWorkspaceAndBadShapes) {
  const Conv2dShape s{2, 3, 8, 8, 4, 3, 3, 1, 1};
  auto x = filled(s.x_count(), 1), w = filled(s.w_count(), 2);
  std::vector<float> y(s.y_count());
  std::vector<float> ws(16);
  EXPECT_THROW(cpu::conv2d_forward(x.data(), w.data(), nullptr, y.data(), s, ws.data(),
                                   static_cast<int64_t>(ws.size())),
               Error);
  Conv2dShape bad = s;
  bad.kh = 11;  // larger than the padded input
  EXPECT_THROW(cpu::conv2d_workspace_count(bad), Error);
  Conv2dShape strided = s;
  strided.stride = 2;
  EXPECT_FALSE(cpu::conv2d_algo_supported(strided, ConvAlgo::Flat, ConvPass::Forward));
  EXPECT_THROW(cpu::conv2d_workspace_count(strided, ConvAlgo::Flat), Error);
}

}  // namespace
}  // namespace engine::kernels
