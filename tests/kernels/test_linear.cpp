// tests/kernels/test_linear.cpp: linear's bias gradient and bias-free forward against the
// reference, beta, empty batch, determinism. The other products against the reference:
// tests/kernels/test_bench_checks.cpp. Finite differences: tests/nn/test_functional.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/reference.h"
#include "tests/common/test_util.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;

struct Out {
  std::vector<float> y, dx, dw, db;
};

Out run(const LinearShape& s, const std::vector<float>& x, const std::vector<float>& w,
        const float* b, const std::vector<float>& dy) {
  Out o{std::vector<float>(s.n * s.out), std::vector<float>(s.n * s.in),
        std::vector<float>(s.out * s.in), std::vector<float>(s.out)};
  cpu::linear_forward(x.data(), w.data(), b, o.y.data(), s);
  cpu::linear_backward_data(dy.data(), w.data(), o.dx.data(), s);
  cpu::linear_backward_weight(dy.data(), x.data(), o.dw.data(), s, 0.f);
  cpu::linear_backward_bias(dy.data(), o.db.data(), s, 0.f);
  return o;
}

const LinearShape kShapes[] = {{1, 1, 1}, {3, 5, 7}, {64, 320, 50}, {17, 50, 10}, {5, 9, 300}};

// The bias gradient and the forward without a bias; y, dx and dw against the reference at these
// shapes and the models' are in tests/kernels/test_bench_checks.cpp.
TEST(Linear, BiasGradientAndNoBiasMatchReference) {
  for (const LinearShape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.n) + "x" + std::to_string(s.in) + "->" + std::to_string(s.out));
    auto x = filled(s.n * s.in, 1), w = filled(s.out * s.in, 2), b = filled(s.out, 3);
    auto dy = filled(s.n * s.out, 4);
    Out got = run(s, x, w, b.data(), dy);
    Out want{std::vector<float>(s.n * s.out), std::vector<float>(s.n * s.in),
             std::vector<float>(s.out * s.in), std::vector<float>(s.out)};
    ref::linear_backward(x.data(), w.data(), dy.data(), want.dx.data(), want.dw.data(),
                         want.db.data(), s);
    EXPECT_LT(ref::max_rel_error(got.db.data(), want.db.data(), s.out), 1e-5);
    std::vector<float> y_nobias(s.n * s.out), y_ref(s.n * s.out);
    cpu::linear_forward(x.data(), w.data(), nullptr, y_nobias.data(), s);
    ref::linear_forward(x.data(), w.data(), nullptr, y_ref.data(), s);
    EXPECT_LT(ref::max_rel_error(y_nobias.data(), y_ref.data(), s.n * s.out), 1e-5);
  }
}

TEST(Linear, BetaAccumulates) {
  const LinearShape s{6, 4, 3};
  auto x = filled(s.n * s.in, 5), dy = filled(s.n * s.out, 6);
  std::vector<float> dw(s.out * s.in, 1.f), db(s.out, 2.f), dw0(s.out * s.in), db0(s.out);
  cpu::linear_backward_weight(dy.data(), x.data(), dw0.data(), s, 0.f);
  cpu::linear_backward_bias(dy.data(), db0.data(), s, 0.f);
  cpu::linear_backward_weight(dy.data(), x.data(), dw.data(), s, 1.f);
  cpu::linear_backward_bias(dy.data(), db.data(), s, 0.5f);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], dw0[i] + 1.f, 1e-5);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], db0[i] + 1.f, 1e-5);
}

TEST(Linear, EmptyBatch) {
  const LinearShape s{0, 4, 3};
  std::vector<float> w = filled(12, 1), dw(12, 3.f), db(3, 3.f);
  cpu::linear_forward(nullptr, w.data(), nullptr, nullptr, s);
  cpu::linear_backward_weight(nullptr, nullptr, dw.data(), s, 0.f);
  cpu::linear_backward_bias(nullptr, db.data(), s, 0.f);
  for (float v : dw) EXPECT_EQ(v, 0.f);
  for (float v : db) EXPECT_EQ(v, 0.f);
}

TEST(Linear, DeterministicForAThreadCount) {
  const LinearShape s{33, 70, 129};
  auto x = filled(s.n * s.in, 11), w = filled(s.out * s.in, 12), b = filled(s.out, 13);
  auto dy = filled(s.n * s.out, 14);
  const int saved = num_threads();
  for (int nt : {1, 2}) {
    set_num_threads(nt);
    Out a = run(s, x, w, b.data(), dy), c = run(s, x, w, b.data(), dy);
    EXPECT_EQ(a.y, c.y);
    EXPECT_EQ(a.dx, c.dx);
    EXPECT_EQ(a.dw, c.dw);
    EXPECT_EQ(a.db, c.db);
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace engine::kernels
