// tests/kernels/test_reduce.cpp: reduction steps of the collectives (every op, float, double and
// int64), scale, and the fixed-order sum (same bits at any thread count).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/reference.h"
#include "tests/common/thread_guard.h"

namespace engine::kernels {
namespace {

template <class T>
void check_ops(const std::vector<T>& a, const std::vector<T>& b) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<T> dst = a;
    cpu::reduce_into(dst.data(), b.data(), static_cast<int64_t>(a.size()), op);
    for (size_t i = 0; i < a.size(); ++i) {
      T want = op == ReduceOp::Sum    ? a[i] + b[i]
               : op == ReduceOp::Prod ? a[i] * b[i]
               : op == ReduceOp::Max  ? std::max(a[i], b[i])
                                      : std::min(a[i], b[i]);
      EXPECT_EQ(dst[i], want) << reduce_op_name(op) << " [" << i << "]";
    }
  }
}

TEST(Reduce, EveryOpAndType) {
  std::vector<float> fa(1031), fb(1031);
  ref::fill_uniform(fa.data(), 1031, 1);
  ref::fill_uniform(fb.data(), 1031, 2);
  check_ops(fa, fb);
  std::vector<double> da(fa.begin(), fa.end()), db(fb.begin(), fb.end());
  check_ops(da, db);
  std::vector<int64_t> ia(1031), ib(1031);
  for (int64_t i = 0; i < 1031; ++i) {
    ia[i] = i * 7919 - 4000000;
    ib[i] = (i % 13) - 6;
  }
  check_ops(ia, ib);
}

TEST(Reduce, NaNPropagatesThroughMaxAndMin) {
  std::vector<float> a = {NAN, 1.f, 2.f}, b = {0.f, NAN, 1.f};
  std::vector<float> mx = a, mn = a;
  cpu::reduce_into(mx.data(), b.data(), 3, ReduceOp::Max);
  cpu::reduce_into(mn.data(), b.data(), 3, ReduceOp::Min);
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]) && mx[2] == 2.f);
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && mn[2] == 1.f);
}

TEST(Reduce, Scale) {
  std::vector<float> x = {1.f, -2.f, 4.f};
  cpu::scale(x.data(), 3, 0.25f);
  EXPECT_EQ(x, (std::vector<float>{0.25f, -0.5f, 1.f}));
  std::vector<double> d = {3.0};
  cpu::scale(d.data(), 1, 0.5);
  EXPECT_EQ(d[0], 1.5);
}

TEST(Sum, MatchesReferenceAndSameBitsAtAnyThreadCount) {
  {
    engine::testing::ThreadCount threads(1);
    for (int64_t n : {0, 1, 63, 64, 65, 4097, 1000003}) {
      std::vector<float> x(n);
      ref::fill_uniform(x.data(), n, 3);
      threads.set(1);
      const double one = cpu::sum(x.data(), n), again = cpu::sum(x.data(), n);
      threads.set(2);
      const double two = cpu::sum(x.data(), n);
      EXPECT_EQ(one, again);
      EXPECT_EQ(one, two) << n;
      EXPECT_NEAR(one, ref::sum(x.data(), n), 1e-5 * std::max<double>(1.0, double(n)));
    }
  }
  std::vector<float> x(100, 0.5f);
  EXPECT_EQ(cpu::sum_block(x.data(), 100), 50.f);
}

}  // namespace
}  // namespace engine::kernels
