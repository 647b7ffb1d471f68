// tests/kernels/test_bench_checks.cpp: bench_kernels' reference checks at small sizes, so that a
// kernel that goes wrong fails CI even when nobody runs the benchmark. Same Ops, same tolerances
// (apps/bench_kernels/checks.h); the models' layer shapes at batch 2-3, on 1 and 2 threads. The
// CUDA Ops (apps/bench_kernels/ops_cuda.h) at the same sizes, skipped when no CUDA device
// answers; and the program itself with --device cuda: exit code 2 and one line without a device,
// a small run whose checks pass with one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "apps/bench_kernels/checks.h"
#include "apps/bench_kernels/ops_cuda.h"
#include "apps/bench_kernels/ops_elementwise.h"
#include "apps/bench_kernels/ops_gemm_conv.h"
#include "apps/bench_kernels/ops_optim.h"
#include "core/device.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/common/run.h"

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

constexpr ConvPass kPasses[] = {ConvPass::Forward, ConvPass::BackwardInput,
                                ConvPass::BackwardWeight};

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

// The one place the CPU kernels meet kernels/cpu/reference.h at these shapes (the kernel tests
// check what the Ops do not: bias gradients, beta, determinism, edge values).
TEST(BenchChecks, LinearAtModelShapes) {
  // (n, in, out): the models' linear layers at batch 3, then awkward sizes.
  const int64_t sites[][3] = {{3, 3136, 128}, {3, 128, 10}, {3, 1568, 10}, {3, 320, 50},
                              {3, 50, 10},    {3, 784, 10}, {1, 1, 1},     {3, 5, 7},
                              {64, 320, 50},  {17, 50, 10}, {5, 9, 300}};
  at_thread_counts([&](const std::string& t) {
    for (auto& s : sites)
      for (ConvPass p : kPasses) {
        LinearOp op(p, {s[0], s[1], s[2]});
        expect_ok(op, t + " linear " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "->" +
                          std::to_string(s[2]) + " " + pass_name(p));
      }
  });
}

// "x (n,c,h,w) k kh x kw s stride p pad -> c_out"
std::string conv_name(const kernels::Conv2dShape& s) {
  auto i = [](int64_t v) { return std::to_string(v); };
  return "x (" + i(s.n) + "," + i(s.c_in) + "," + i(s.h) + "," + i(s.w) + ") k " + i(s.kh) + "x" +
         i(s.kw) + " s" + i(s.stride) + " p" + i(s.pad) + " -> " + i(s.c_out);
}

TEST(BenchChecks, Conv2dAtModelShapes) {
  using kernels::cpu::ConvAlgo;
  // n, c_in, h, w, c_out, kh, kw, stride, pad: the six conv layers of the models at batch 2, a
  // strided one, then awkward shapes.
  const kernels::Conv2dShape sites[] = {
      {2, 1, 28, 28, 32, 3, 3, 1, 1},  {2, 32, 14, 14, 64, 3, 3, 1, 1},
      {2, 1, 28, 28, 16, 5, 5, 1, 2},  {2, 16, 14, 14, 32, 5, 5, 1, 2},
      {2, 1, 28, 28, 10, 5, 5, 1, 0},  {2, 10, 12, 12, 20, 5, 5, 1, 0},
      {2, 3, 11, 9, 5, 3, 3, 2, 1},    {2, 3, 7, 9, 5, 3, 3, 1, 1},  // odd sizes
      {3, 2, 11, 6, 17, 3, 3, 1, 0},  // 17 outputs: channel vectors padded
      {2, 4, 9, 9, 6, 5, 5, 1, 2},     {1, 1, 28, 28, 8, 5, 5, 1, 0},  // one input channel
      {2, 5, 8, 10, 33, 1, 1, 1, 0},                                   // 1x1
      {2, 3, 10, 9, 4, 2, 2, 1, 1},                                    // even kernel
      {2, 3, 9, 11, 4, 3, 5, 1, 2},     // rectangular kernel, pad > kh-1
      {2, 3, 9, 9, 5, 3, 3, 2, 1},      // stride 2
      {2, 2, 10, 7, 3, 4, 2, 3, 0},     // stride 3
      {3, 10, 12, 12, 20, 5, 5, 1, 0},  // net.conv2 at batch 3
      {1, 7, 5, 40, 3, 3, 3, 1, 1},     // rows wider than 32
      {2, 2, 3, 3, 3, 3, 3, 1, 2},      // output larger than input
      {0, 3, 5, 5, 4, 3, 3, 1, 1},      // empty batch
  };
  const std::pair<ConvAlgo, const char*> algos[] = {{ConvAlgo::Auto, "auto"},
                                                    {ConvAlgo::Flat, "flat"},
                                                    {ConvAlgo::ChannelVector, "channel-vector"},
                                                    {ConvAlgo::Im2col, "im2col"}};
  at_thread_counts([&](const std::string& t) {
    for (const kernels::Conv2dShape& s : sites)
      for (auto& [algo, algo_name] : algos)
        for (ConvPass p : kPasses) {
          if (!kernels::cpu::conv2d_algo_supported(s, algo, p)) continue;
          Conv2dOp op(p, s, algo);
          expect_ok(op, t + " conv " + conv_name(s) + " " + algo_name + " " + pass_name(p));
        }
  });
}

// bench_kernels' linear_bf16/ and conv2d_bf16/ cases: the models' layers at batch 8 (big enough
// for the vdpbf16ps GEMM), a strided and an empty one (the rounding path), checked against ref::
// on operands rounded to bf16. Skips without AVX512_BF16.
TEST(BenchChecks, Bf16AtModelShapes) {
  if (!kernels::cpu::has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const int64_t linear[][3] = {{8, 3136, 128}, {8, 128, 10}, {8, 1568, 10},
                               {8, 320, 50},   {8, 50, 10},  {8, 784, 10}};
  const kernels::Conv2dShape convs[] = {
      {8, 1, 28, 28, 32, 3, 3, 1, 1}, {8, 32, 14, 14, 64, 3, 3, 1, 1},
      {8, 1, 28, 28, 16, 5, 5, 1, 2}, {8, 16, 14, 14, 32, 5, 5, 1, 2},
      {8, 1, 28, 28, 10, 5, 5, 1, 0}, {8, 10, 12, 12, 20, 5, 5, 1, 0},
      {2, 3, 11, 9, 5, 3, 3, 2, 1},   {0, 4, 5, 5, 4, 3, 3, 1, 1}};
  at_thread_counts([&](const std::string& t) {
    for (ConvPass p : kPasses) {
      for (auto& l : linear) {
        LinearOp op(p, {l[0], l[1], l[2]}, Precision::BF16);
        expect_ok(op, t + " linear bf16 " + std::to_string(l[1]) + "->" + std::to_string(l[2]) +
                          " " + pass_name(p));
      }
      for (const kernels::Conv2dShape& s : convs) {
        Conv2dOp op(p, s, kernels::cpu::ConvAlgo::Auto, Precision::BF16);
        expect_ok(op, t + " conv bf16 " + conv_name(s) + " " + pass_name(p));
      }
    }
  });
}

// n, c, h, w, k, stride: the models' pools, then odd sizes, overlapping windows (k > stride),
// k = stride = 3, a 1x1 input, a large batch.
const kernels::Pool2dShape kPools[] = {
    {2, 32, 28, 28, 2, 2}, {2, 10, 24, 24, 2, 2}, {3, 3, 7, 9, 2, 2}, {3, 2, 7, 9, 2, 2},
    {2, 3, 8, 8, 2, 2},    {2, 2, 9, 7, 3, 2},    {1, 4, 5, 5, 3, 1}, {2, 1, 6, 11, 3, 3},
    {1, 1, 1, 1, 1, 1},    {64, 32, 28, 28, 2, 2}};

std::string pool_name(const kernels::Pool2dShape& s) {
  return std::to_string(s.h) + "x" + std::to_string(s.w) + " k" + std::to_string(s.k) + " s" +
         std::to_string(s.stride);
}

TEST(BenchChecks, LayersAtModelShapes) {
  at_thread_counts([&](const std::string& t) {
    for (bool bwd : {false, true}) {
      const std::string dir = bwd ? " bwd" : " fwd";
      for (const kernels::Pool2dShape& s : kPools) {
        MaxPool2dOp op(bwd, s);
        expect_ok(op, t + " max_pool2d " + pool_name(s) + dir);
      }
      for (int64_t n : {1, 15, 2 * 32 * 14 * 14 + 3, 100003}) {
        ReluOp op(bwd, n);
        expect_ok(op, t + " relu " + std::to_string(n) + dir);
      }
      // (n, c, hw): the models' batch norms, then awkward ones (one value per plane, one image).
      for (auto& s : {kernels::BatchNormShape{2, 16, 784}, kernels::BatchNormShape{3, 32, 196},
                      kernels::BatchNormShape{4, 3, 25}, kernels::BatchNormShape{2, 5, 1},
                      kernels::BatchNormShape{1, 2, 9}, kernels::BatchNormShape{7, 16, 49}}) {
        BatchNormTrainOp op(bwd, s);
        expect_ok(op, t + " batch_norm_train " + std::to_string(s.n) + "x" + std::to_string(s.c) +
                          "x" + std::to_string(s.hw) + dir);
      }
      for (auto [n, c] :
           {std::pair<int64_t, int64_t>{5, 10}, {1, 1}, {64, 10}, {3, 1001}, {37, 10}}) {
        LogSoftmaxNllOp loss(bwd, n, c);
        expect_ok(loss,
                  t + " log_softmax_nll " + std::to_string(n) + "x" + std::to_string(c) + dir);
      }
      for (float p : {0.f, 0.25f, 0.5f, 0.9f, 1.f}) {
        DropoutOp drop(bwd, 1, 2 * 3136 + 1, p, false), odd(bwd, 1, 10007, p, false);
        expect_ok(drop, t + " dropout p " + std::to_string(p) + dir);
        expect_ok(odd, t + " dropout 10007 p " + std::to_string(p) + dir);
      }
      DropoutOp drop2d(bwd, 2 * 20, 64, 0.5f, true), planes7x7(bwd, 2 * 64, 49, 0.5f, true);
      expect_ok(drop2d, t + " dropout2d" + dir);
      expect_ok(planes7x7, t + " dropout2d 7x7" + dir);
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

// ---- the CUDA Ops, at the sizes above ----------------------------------------------------------

class BenchChecksCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
  static constexpr int kDev = 0;
};

TEST_F(BenchChecksCuda, LinearAtModelShapes) {
  const int64_t sites[][2] = {{3136, 128}, {128, 10}, {1568, 10}, {320, 50}, {50, 10}, {784, 10}};
  for (auto& io : sites)
    for (ConvPass p : kPasses) {
      CudaLinearOp op(kDev, p, {3, io[0], io[1]});
      expect_ok(op, "cuda linear " + std::to_string(io[0]) + "->" + std::to_string(io[1]) + " " +
                        pass_name(p));
    }
}

TEST_F(BenchChecksCuda, Conv2dAtModelShapes) {
  const int64_t sites[][7] = {{1, 28, 28, 32, 3, 1, 1}, {32, 14, 14, 64, 3, 1, 1},
                              {1, 28, 28, 16, 5, 1, 2}, {16, 14, 14, 32, 5, 1, 2},
                              {1, 28, 28, 10, 5, 1, 0}, {10, 12, 12, 20, 5, 1, 0},
                              {3, 11, 9, 5, 3, 2, 1}};
  for (auto& c : sites)
    for (ConvPass p : kPasses) {
      kernels::Conv2dShape s{2, c[0], c[1], c[2], c[3], c[4], c[4], c[5], c[6]};
      CudaConv2dOp op(kDev, p, s);
      expect_ok(op, "cuda conv " + std::to_string(c[0]) + "->" + std::to_string(c[3]) + " k" +
                        std::to_string(c[4]) + " s" + std::to_string(c[5]) + " " + pass_name(p));
    }
}

TEST_F(BenchChecksCuda, LayersAtModelShapes) {
  for (bool bwd : {false, true}) {
    const std::string dir = bwd ? " bwd" : " fwd";
    for (auto& s :
         {kernels::Pool2dShape{2, 32, 28, 28, 2, 2}, kernels::Pool2dShape{2, 10, 24, 24, 2, 2},
          kernels::Pool2dShape{3, 3, 7, 9, 2, 2}}) {
      CudaMaxPool2dOp op(kDev, bwd, s);
      expect_ok(op, "cuda max_pool2d" + dir);
    }
    for (int64_t n : {1, 15, 2 * 32 * 14 * 14 + 3}) {
      CudaReluOp op(kDev, bwd, n);
      expect_ok(op, "cuda relu " + std::to_string(n) + dir);
    }
    for (auto& s : {kernels::BatchNormShape{2, 16, 784}, kernels::BatchNormShape{3, 32, 196}}) {
      CudaBatchNormTrainOp op(kDev, bwd, s);
      expect_ok(op, "cuda batch_norm_train" + dir);
    }
    CudaLogSoftmaxNllOp loss(kDev, bwd, 5, 10);
    expect_ok(loss, "cuda log_softmax_nll" + dir);
    CudaDropoutOp drop(kDev, bwd, 1, 2 * 3136 + 1, 0.25f, false);
    expect_ok(drop, "cuda dropout" + dir);
    CudaDropoutOp drop2d(kDev, bwd, 2 * 20, 64, 0.5f, true);
    expect_ok(drop2d, "cuda dropout2d" + dir);
  }
}

TEST_F(BenchChecksCuda, UpdatesAndReduce) {
  const std::vector<int64_t> counts = {288, 32, 18432, 64, 401408, 128, 1280, 10};
  CudaSgdOp sgd(kDev, counts);
  expect_ok(sgd, "cuda sgd");
  CudaAdamOp adam(kDev, counts);
  expect_ok(adam, "cuda adam");
  for (int64_t n : {int64_t(1), int64_t(17), int64_t(1024), int64_t(1 << 20) + 5}) {
    CudaReduceSumOp op(kDev, n);
    expect_ok(op, "cuda reduce_into " + std::to_string(n));
  }
}

TEST(BenchChecksCudaTolerances, LooserThanTheCpusButFarBelowABug) {
  for (int64_t k : {1, 50, 3136, 100352}) {
    EXPECT_GE(cublas_tol(k), sum_tol(k));
    EXPECT_GE(cudnn_tol(k), sum_tol(k));
    EXPECT_LT(cudnn_tol(k), 2e-3) << k;  // an element from the wrong place is an error of ~1
  }
}

// ---- the program: bench_kernels --device cuda -------------------------------------------------

const std::string kBenchKernels = std::string(ENGINE_BUILD_DIR) + "/apps/bench_kernels";

// bench_kernels <args>: its exit code, stdout and stderr.
testing::RunResult run_bench_kernels(const std::string& args) {
  return testing::run(kBenchKernels + " " + args);
}

TEST(BenchKernelsDevice, CudaWithoutADeviceExitsTwoWithOneLine) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device answers here";
  for (const char* flag : {"--device cuda", "--device=cuda", "--device cuda:0"}) {
    testing::RunResult r = run_bench_kernels(std::string(flag) + " --benchmark_filter=relu");
    EXPECT_EQ(r.code, 2) << flag << ":\n" << r.output;
    EXPECT_EQ(r.output.rfind("bench_kernels: no CUDA device: ", 0), 0u) << flag << ":\n"
                                                                        << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "not one line:\n" << r.output;
  }
}

TEST(BenchKernelsDevice, BadDeviceIsAnError) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  testing::RunResult r = run_bench_kernels("--device tpu --benchmark_filter=relu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("tpu"), std::string::npos) << r.output;
}

TEST(BenchKernelsDevice, SmallCudaRunPassesItsChecks) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  // One case of each family, batch 64, timed briefly; JSON, so every counter is in the output.
  const std::string filter =
      "^(linear/net.fc1|conv2d/net.conv2|max_pool2d/net.pool2|relu/net.relu2|"
      "batch_norm2d_train/convnet.layer2.1|log_softmax_nll/all|dropout2d/net.conv2_drop|"
      "dropout/net.dropout|sgd_step/net|adam_step/net|reduce_into_sum/kernels/4KB)(/|$)";
  testing::RunResult r = run_bench_kernels("--device cuda '--benchmark_filter=" + filter +
                                           "' --benchmark_min_time=0.01 --benchmark_format=json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"error_occurred\": true"), std::string::npos) << r.output;
  for (const char* want : {"ceiling_compute", "ceiling_memory", "CUBLAS_DEFAULT_MATH",
                           "\"linear/net.fc1/fwd/b64", "\"conv2d/net.conv2/bwd_weight/b64",
                           "\"adam_step/net/all_params", "\"check_err\"", "\"pct_of_ceiling\""})
    EXPECT_NE(r.output.find(want), std::string::npos) << want << " missing:\n" << r.output;
}

}  // namespace
}  // namespace engine::bench
