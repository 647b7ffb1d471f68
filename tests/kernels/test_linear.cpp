// tests/kernels/test_linear.cpp: every product of linear, with and without a bias, against the
// reference at small shapes and at the edges of the AVX-512 GEMM's tiles, beta, empty batch,
// determinism and independence from the thread count. The models' shapes against the reference:
// the kernel-case table (kernels/testing/table.h). Finite differences:
// tests/nn/test_functional.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/reference.h"
#include "tests/common/test_util.h"
#include "tests/common/thread_guard.h"

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

// Shapes at the edges of the AVX-512 GEMMs' tiles and K blocks (gemm_f32.cpp): rows not a
// multiple of 4 or 12, columns not a multiple of 6 or 32, K past one block of 256 or 1024.
const LinearShape kEdgeShapes[] = {{13, 1100, 37}, {300, 40, 600}, {1, 3136, 128}, {128, 3136, 10}};

// Every product, with and without a bias, against the reference (the models' shapes are in
// the kernel-case table (kernels/testing/table.h)); beta 1 adds the weight gradient to what is
// there.
TEST(Linear, EveryProductMatchesReference) {
  std::vector<LinearShape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.insert(shapes.end(), std::begin(kEdgeShapes), std::end(kEdgeShapes));
  for (const LinearShape& s : shapes) {
    SCOPED_TRACE(std::to_string(s.n) + "x" + std::to_string(s.in) + "->" + std::to_string(s.out));
    auto x = filled(s.n * s.in, 1), w = filled(s.out * s.in, 2), b = filled(s.out, 3);
    auto dy = filled(s.n * s.out, 4);
    Out got = run(s, x, w, b.data(), dy);
    Out want{std::vector<float>(s.n * s.out), std::vector<float>(s.n * s.in),
             std::vector<float>(s.out * s.in), std::vector<float>(s.out)};
    ref::linear_forward(x.data(), w.data(), b.data(), want.y.data(), s);
    ref::linear_backward(x.data(), w.data(), dy.data(), want.dx.data(), want.dw.data(),
                         want.db.data(), s);
    EXPECT_LT(ref::max_rel_error(got.y.data(), want.y.data(), s.n * s.out), 1e-5);
    EXPECT_LT(ref::max_rel_error(got.dx.data(), want.dx.data(), s.n * s.in), 1e-5);
    EXPECT_LT(ref::max_rel_error(got.dw.data(), want.dw.data(), s.out * s.in), 1e-5);
    EXPECT_LT(ref::max_rel_error(got.db.data(), want.db.data(), s.out), 1e-5);
    std::vector<float> y_nobias(s.n * s.out), y_ref(s.n * s.out);
    cpu::linear_forward(x.data(), w.data(), nullptr, y_nobias.data(), s);
    ref::linear_forward(x.data(), w.data(), nullptr, y_ref.data(), s);
    EXPECT_LT(ref::max_rel_error(y_nobias.data(), y_ref.data(), s.n * s.out), 1e-5);
    std::vector<float> acc(s.out * s.in, 0.5f);
    cpu::linear_backward_weight(dy.data(), x.data(), acc.data(), s, 1.f);
    for (size_t i = 0; i < acc.size(); ++i) ASSERT_NEAR(acc[i], got.dw[i] + 0.5f, 1e-4) << i;
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
  for (int nt : {1, 2}) {
    engine::testing::ThreadCount threads(nt);
    Out a = run(s, x, w, b.data(), dy), c = run(s, x, w, b.data(), dy);
    EXPECT_EQ(a.y, c.y);
    EXPECT_EQ(a.dx, c.dx);
    EXPECT_EQ(a.dw, c.dw);
    EXPECT_EQ(a.db, c.db);
  }
}

// Each output element is summed by one thread in one order: 1 and 2 threads give equal floats.
TEST(Linear, ResultsDoNotDependOnTheThreadCount) {
  engine::testing::ThreadCount threads(1);
  for (const LinearShape& s : kEdgeShapes) {
    auto x = filled(s.n * s.in, 31), w = filled(s.out * s.in, 32), b = filled(s.out, 33);
    auto dy = filled(s.n * s.out, 34);
    threads.set(1);
    Out one = run(s, x, w, b.data(), dy);
    threads.set(2);
    Out two = run(s, x, w, b.data(), dy);
    EXPECT_EQ(one.y, two.y);
    EXPECT_EQ(one.dx, two.dx);
    EXPECT_EQ(one.dw, two.dw);
  }
}

}  // namespace
}  // namespace engine::kernels
