// tests/kernels/test_bench_checks.cpp: bench_kernels' reference checks at small sizes, so that a
// kernel that goes wrong fails CI even when nobody runs the benchmark. Same Ops, same tolerances
// (apps/bench_kernels/checks.h); the models' layer shapes at batch 2-3, on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "apps/bench_kernels/checks.h"
#include "apps/bench_kernels/ops_elementwise.h"
#include "apps/bench_kernels/ops_gemm_conv.h"
#include "apps/bench_kernels/ops_optim.h"
#include "core/thread_pool.h"

namespace engine::bench {
namespace {

void expect_ok(Op& op, const std::string& name) {
  CheckResult r = op.check();
  EXPECT_TRUE(r.ok()) << name << ": " << r.message();
}

// Runs body at 1 and 2 threads, restoring the thread count afterwards.
template <class F>
void at_thread_counts(F body) {
  const int before = num_threads();
  for (int t : {1, 2}) {
    set_num_threads(t);
    body("threads=" + std::to_string(t));
  }
  set_num_threads(before);
}

constexpr Pass kPasses[] = {Pass::kForward, Pass::kBackwardData, Pass::kBackwardWeight};

TEST(BenchChecks, CompareFindsTheWorstElement) {
  const float want[] = {1.f, -4.f, 2.f, 0.f};
  const float got[] = {1.f, -4.f, 2.5f, 0.1f};
  CheckResult r = compare("y", got, want, 4, 1e-3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.index, 2);
  EXPECT_FLOAT_EQ(r.got, 2.5f);
  EXPECT_FLOAT_EQ(r.want, 2.f);
  EXPECT_DOUBLE_EQ(r.err, 0.5 / 4.0);  // relative to max |want|
  EXPECT_NE(r.message().find("worst element 2: got 2.5, want 2"), std::string::npos) << r.message();
  EXPECT_TRUE(compare("y", want, want, 4, kExact).ok());
}

TEST(BenchChecks, CompareTreatsNaN) {
  const float nan = std::nanf("");
  const float want[] = {nan, 1.f};
  const float same[] = {nan, 1.f};
  const float other[] = {0.f, nan};
  EXPECT_TRUE(compare("y", same, want, 2, kExact).ok());
  CheckResult r = compare("y", other, want, 2, 1.0);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(std::isinf(r.err));
}

TEST(BenchChecks, WorstOfPicksTheFurthestOutside) {
  CheckResult a{"a", 1e-7, 1e-6}, b{"b", 2e-6, 1e-6}, c{"c", 1e-6, 1e-5};
  EXPECT_EQ(worst_of({a, b, c}).what, "b");
  EXPECT_EQ(worst_of({a, c}).what, "a");
}

TEST(BenchChecks, LinearAtModelShapes) {
  const int64_t sites[][2] = {{3136, 128}, {128, 10}, {1568, 10}, {320, 50}, {50, 10}, {784, 10}};
  at_thread_counts([&](const std::string& t) {
    for (auto& io : sites)
      for (Pass p : kPasses) {
        LinearOp op(p, {3, io[0], io[1]});
        expect_ok(op, t + " linear " + std::to_string(io[0]) + "->" + std::to_string(io[1]) + " " +
                          pass_name(p));
      }
  });
}

kernels::cpu::ConvPass conv_pass(Pass p) {
  switch (p) {
    case Pass::kForward:
      return kernels::cpu::ConvPass::kForward;
    case Pass::kBackwardData:
      return kernels::cpu::ConvPass::kBackwardData;
    case Pass::kBackwardWeight:
      return kernels::cpu::ConvPass::kBackwardFilter;
  }
  return kernels::cpu::ConvPass::kForward;
}

TEST(BenchChecks, Conv2dAtModelShapes) {
  using kernels::cpu::ConvAlgo;
  // (c_in, h, w, c_out, k, stride, pad): the six conv layers of the models, and a strided one.
  const int64_t sites[][7] = {{1, 28, 28, 32, 3, 1, 1}, {32, 14, 14, 64, 3, 1, 1},
                              {1, 28, 28, 16, 5, 1, 2}, {16, 14, 14, 32, 5, 1, 2},
                              {1, 28, 28, 10, 5, 1, 0}, {10, 12, 12, 20, 5, 1, 0},
                              {3, 11, 9, 5, 3, 2, 1}};
  const std::pair<ConvAlgo, const char*> algos[] = {{ConvAlgo::kAuto, "auto"},
                                                    {ConvAlgo::kFlat, "flat"},
                                                    {ConvAlgo::kChannelVector, "channel-vector"},
                                                    {ConvAlgo::kIm2col, "im2col"}};
  at_thread_counts([&](const std::string& t) {
    for (auto& c : sites)
      for (auto& [algo, algo_name] : algos)
        for (Pass p : kPasses) {
          kernels::Conv2dShape s{2, c[0], c[1], c[2], c[3], c[4], c[4], c[5], c[6]};
          if (!kernels::cpu::conv2d_algo_supported(s, algo, conv_pass(p))) continue;
          Conv2dOp op(p, s, algo);
          expect_ok(op, t + " conv " + std::to_string(c[0]) + "->" + std::to_string(c[3]) + " k" +
                            std::to_string(c[4]) + " s" + std::to_string(c[5]) + " " + algo_name +
                            " " + pass_name(p));
        }
  });
}

TEST(BenchChecks, LayersAtModelShapes) {
  at_thread_counts([&](const std::string& t) {
    for (bool bwd : {false, true}) {
      const std::string dir = bwd ? " bwd" : " fwd";
      for (auto& s :
           {kernels::Pool2dShape{2, 32, 28, 28, 2, 2}, kernels::Pool2dShape{2, 10, 24, 24, 2, 2},
            kernels::Pool2dShape{3, 3, 7, 9, 2, 2}}) {
        MaxPool2dOp op(bwd, s);
        expect_ok(op, t + " max_pool2d" + dir);
      }
      for (int64_t n : {1, 15, 2 * 32 * 14 * 14 + 3}) {
        ReluOp op(bwd, n);
        expect_ok(op, t + " relu " + std::to_string(n) + dir);
      }
      for (auto& s : {kernels::BatchNormShape{2, 16, 784}, kernels::BatchNormShape{3, 32, 196}}) {
        BatchNormTrainOp op(bwd, s);
        expect_ok(op, t + " batch_norm_train" + dir);
      }
      LogSoftmaxNllOp loss(bwd, 5, 10);
      expect_ok(loss, t + " log_softmax_nll" + dir);
      DropoutOp drop(bwd, 1, 2 * 3136 + 1, 0.25f, false);
      expect_ok(drop, t + " dropout" + dir);
      DropoutOp drop2d(bwd, 2 * 20, 64, 0.5f, true);
      expect_ok(drop2d, t + " dropout2d" + dir);
    }
  });
}

TEST(BenchChecks, UpdatesAndReduce) {
  // simplecnn's parameter tensors: conv1, conv2, fc1, fc2 (weight, bias each).
  const std::vector<int64_t> counts = {288, 32, 18432, 64, 401408, 128, 1280, 10};
  SgdOp sgd(counts);
  expect_ok(sgd, "sgd");
  AdamOp adam(counts);
  expect_ok(adam, "adam");
  for (int64_t n : {int64_t(1), int64_t(17), int64_t(1024), int64_t(1 << 20) + 5}) {
    ReduceSumOp op(n);
    expect_ok(op, "reduce_into " + std::to_string(n));
  }
}

}  // namespace
}  // namespace engine::bench
