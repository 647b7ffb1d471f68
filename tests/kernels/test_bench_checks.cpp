// tests/kernels/test_bench_checks.cpp: bench_kernels' reference checks at small sizes, so that a
// kernel that goes wrong fails CI even when nobody runs the benchmark. Same Ops, same tolerances
// (apps/bench_kernels/checks.h); the models' layer shapes at batch 2-3, on 1 and 2 threads. The
// CUDA Ops (apps/bench_kernels/ops_cuda.h) at the same sizes, skipped when no CUDA device
// answers; and the program itself with --device cuda: exit code 2 and one line without a device,
// a small run whose checks pass with one.
#include <gtest/gtest.h>
#include <sys/wait.h>
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

constexpr ConvPass kPasses[] = {ConvPass::Forward, ConvPass::BackwardData,
                                ConvPass::BackwardFilter};

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
      for (ConvPass p : kPasses) {
        LinearOp op(p, {3, io[0], io[1]});
        expect_ok(op, t + " linear " + std::to_string(io[0]) + "->" + std::to_string(io[1]) + " " +
                          pass_name(p));
      }
  });
}

TEST(BenchChecks, Conv2dAtModelShapes) {
  using kernels::cpu::ConvAlgo;
  // (c_in, h, w, c_out, k, stride, pad): the six conv layers of the models, and a strided one.
  const int64_t sites[][7] = {{1, 28, 28, 32, 3, 1, 1}, {32, 14, 14, 64, 3, 1, 1},
                              {1, 28, 28, 16, 5, 1, 2}, {16, 14, 14, 32, 5, 1, 2},
                              {1, 28, 28, 10, 5, 1, 0}, {10, 12, 12, 20, 5, 1, 0},
                              {3, 11, 9, 5, 3, 2, 1}};
  const std::pair<ConvAlgo, const char*> algos[] = {{ConvAlgo::Auto, "auto"},
                                                    {ConvAlgo::Flat, "flat"},
                                                    {ConvAlgo::ChannelVector, "channel-vector"},
                                                    {ConvAlgo::Im2col, "im2col"}};
  at_thread_counts([&](const std::string& t) {
    for (auto& c : sites)
      for (auto& [algo, algo_name] : algos)
        for (ConvPass p : kPasses) {
          kernels::Conv2dShape s{2, c[0], c[1], c[2], c[3], c[4], c[4], c[5], c[6]};
          if (!kernels::cpu::conv2d_algo_supported(s, algo, p)) continue;
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

struct ProgramRun {
  int code = -1;
  std::string out;  // stdout and stderr together
};

ProgramRun run_bench_kernels(const std::string& args) {
  ProgramRun r;
  FILE* p = popen((kBenchKernels + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) r.out += buf;
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return r;
}

TEST(BenchKernelsDevice, CudaWithoutADeviceExitsTwoWithOneLine) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device answers here";
  for (const char* flag : {"--device cuda", "--device=cuda", "--device cuda:0"}) {
    ProgramRun r = run_bench_kernels(std::string(flag) + " --benchmark_filter=relu");
    EXPECT_EQ(r.code, 2) << flag << ":\n" << r.out;
    EXPECT_EQ(r.out.rfind("bench_kernels: no CUDA device: ", 0), 0u) << flag << ":\n" << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "not one line:\n" << r.out;
  }
}

TEST(BenchKernelsDevice, BadDeviceIsAnError) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  ProgramRun r = run_bench_kernels("--device tpu --benchmark_filter=relu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tpu"), std::string::npos) << r.out;
}

TEST(BenchKernelsDevice, SmallCudaRunPassesItsChecks) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  // One case of each family, batch 64, timed briefly; JSON, so every counter is in the output.
  const std::string filter =
      "^(linear/net.fc1|conv2d/net.conv2|max_pool2d/net.pool2|relu/net.relu2|"
      "batch_norm2d_train/convnet.layer2.1|log_softmax_nll/all|dropout2d/net.conv2_drop|"
      "dropout/net.dropout|sgd_step/net|adam_step/net|reduce_into_sum/kernels/4KB)(/|$)";
  ProgramRun r = run_bench_kernels("--device cuda '--benchmark_filter=" + filter +
                                   "' --benchmark_min_time=0.01 --benchmark_format=json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"error_occurred\": true"), std::string::npos) << r.out;
  for (const char* want : {"ceiling_compute", "ceiling_memory", "CUBLAS_DEFAULT_MATH",
                           "\"linear/net.fc1/fwd/b64", "\"conv2d/net.conv2/bwd_weight/b64",
                           "\"adam_step/net/all_params", "\"check_err\"", "\"pct_of_ceiling\""})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " missing:\n" << r.out;
}

}  // namespace
}  // namespace engine::bench
