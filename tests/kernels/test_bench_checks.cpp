// tests/kernels/test_bench_checks.cpp: the comparison every kernel case is checked with
// (kernels/testing/check.h) and the CUDA tolerances (kernels/testing/ops_cuda.h); the cases
// themselves run in tests/kernels/test_kernel_table.cpp. And the program bench_kernels with
// --device cuda: exit code 2 and one line without a device, a small run whose checks pass with
// one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>

#include "core/device.h"
#include "kernels/testing/check.h"
#include "kernels/testing/ops_cuda.h"
#include "tests/common/run.h"

namespace engine::kernels::testing {
namespace {

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
engine::testing::RunResult run_bench_kernels(const std::string& args) {
  return engine::testing::run(kBenchKernels + " " + args);
}

TEST(BenchKernelsDevice, CudaWithoutADeviceExitsTwoWithOneLine) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device answers here";
  for (const char* flag : {"--device cuda", "--device=cuda", "--device cuda:0"}) {
    engine::testing::RunResult r =
        run_bench_kernels(std::string(flag) + " --benchmark_filter=relu");
    EXPECT_EQ(r.code, 2) << flag << ":\n" << r.output;
    EXPECT_EQ(r.output.rfind("bench_kernels: no CUDA device: ", 0), 0u) << flag << ":\n"
                                                                        << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "not one line:\n" << r.output;
  }
}

TEST(BenchKernelsDevice, BadDeviceIsAnError) {
  if (access(kBenchKernels.c_str(), X_OK) != 0) GTEST_SKIP() << kBenchKernels << " is not built";
  engine::testing::RunResult r = run_bench_kernels("--device tpu --benchmark_filter=relu");
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
  engine::testing::RunResult r =
      run_bench_kernels("--device cuda '--benchmark_filter=" + filter +
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
}  // namespace engine::kernels::testing
