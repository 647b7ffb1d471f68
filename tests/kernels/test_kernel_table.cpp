// tests/kernels/test_kernel_table.cpp: the kernel-case table (kernels/testing/table.h) in check
// mode, one parameterised test per case: every case on the CPU at 1 and 2 threads, and the cases
// marked for CUDA on engine::testing::cuda_test_device(), skipped with the reason when no CUDA
// device answers. A kernel that goes wrong fails here even when nobody runs bench_kernels.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/choice.h"
#include "kernels/testing/case_list.h"
#include "kernels/testing/table.h"
#include "tests/common/test_util.h"
#include "tests/common/thread_guard.h"

namespace engine::kernels::testing {
namespace {

const std::vector<KernelCase>& cases() {
  static const std::vector<KernelCase> c = check_cases();
  return c;
}

// The indices of the cases on the CPU (all) or on CUDA (those marked for it).
std::vector<size_t> indices(bool cuda) {
  std::vector<size_t> out;
  for (size_t i = 0; i < cases().size(); ++i)
    if (!cuda || cases()[i].cuda) out.push_back(i);
  return out;
}

std::string param_name(const ::testing::TestParamInfo<size_t>& info) {
  return test_name(cases()[info.param].name);
}

class KernelTableCpu : public ::testing::TestWithParam<size_t> {};
class KernelTableCuda : public ::testing::TestWithParam<size_t> {};

TEST_P(KernelTableCpu, MatchesTheReference) {
  const KernelCase& c = cases()[GetParam()];
  if (const std::string why = unavailable(c, -1); !why.empty()) GTEST_SKIP() << why;
  for (int t : {1, 2}) {
    engine::testing::ThreadCount threads(t);
    const CheckResult r = run_check(c, -1);
    EXPECT_TRUE(r.ok()) << c.name << " threads=" << t << ": " << r.message();
  }
}

TEST_P(KernelTableCuda, MatchesTheReference) {
  const KernelCase& c = cases()[GetParam()];
  if (const std::string why = engine::testing::cuda_test_skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  const int dev = engine::testing::cuda_test_device().index;
  if (const std::string why = unavailable(c, dev); !why.empty()) GTEST_SKIP() << why;
  const CheckResult r = run_check(c, dev);
  EXPECT_TRUE(r.ok()) << "cuda " << c.name << ": " << r.message();
}

INSTANTIATE_TEST_SUITE_P(Table, KernelTableCpu, ::testing::ValuesIn(indices(false)), param_name);
INSTANTIATE_TEST_SUITE_P(Table, KernelTableCuda, ::testing::ValuesIn(indices(true)), param_name);

TEST(KernelTable, NamesAreUniqueAsTestNames) {
  std::set<std::string> seen;
  for (const KernelCase& c : cases()) EXPECT_TRUE(seen.insert(test_name(c.name)).second) << c.name;
  EXPECT_GT(indices(true).size(), 0u);
}

// Perf mode's cases: bench_kernels' rows, unique, each with an Op on the CPU or its devices.
TEST(KernelTable, PerfCasesAreUniqueAndNamedAsTheBenchRows) {
  const std::vector<KernelCase> perf = perf_cases({{{"linear", {7840, 10}}}, nullptr});
  std::set<std::string> seen;
  for (const KernelCase& c : perf) EXPECT_TRUE(seen.insert(c.name).second) << c.name;
  for (const char* want : {"linear/simplecnn.fc1/fwd/b64", "conv2d/simplecnn.conv2/bwd_weight/b128",
                           "max_pool2d/net.pool2/bwd/b64", "adam_step/linear/all_params",
                           "reduce_into_sum/kernels/64MB", "dropout2d/net.conv2_drop/fwd/b128"})
    EXPECT_EQ(seen.count(want), 1u) << want;
  EXPECT_EQ(seen.count("reduce_into_sum/comm/4KB"), 0u) << "comm's reduce only when given";
}

// The /engine rows: CUDA only, each right after the library row it twins, at every site of the
// ops --cuda-kernels engine runs its own way.
TEST(KernelTable, EngineRowsTwinLibraryRows) {
  const std::vector<KernelCase> perf = perf_cases({{{"linear", {7840, 10}}}, nullptr});
  std::set<std::string> engine;
  for (size_t i = 0; i < perf.size(); ++i) {
    const KernelCase& c = perf[i];
    if (!c.engine) continue;
    engine.insert(c.name);
    EXPECT_FALSE(c.cpu) << c.name;
    EXPECT_TRUE(c.cuda) << c.name;
    ASSERT_GT(i, 0u);
    EXPECT_EQ(perf[i - 1].name + "/engine", c.name);
    EXPECT_FALSE(perf[i - 1].engine) << c.name;
  }
  for (const char* want :
       {"conv2d/simplecnn.conv1/bwd_weight/b128/engine", "conv2d/net.conv2/bwd_weight/b64/engine",
        "linear/simplecnn.fc2/bwd_weight/b128/engine", "linear/convnet.fc/fwd/b128/engine",
        "max_pool2d/simplecnn.pool2/bwd/b128/engine"})
    EXPECT_EQ(engine.count(want), 1u) << want;
  EXPECT_EQ(engine.count("conv2d/simplecnn.conv1/fwd/b128/engine"), 0u) << "cuDNN's forward";
  for (const KernelCase& c : cases()) {
    if (c.engine) {
      EXPECT_EQ(unavailable(c, -1), "a CUDA case") << c.name;
    }
  }
}

// An Op that records the process's choice of CUDA kernels while it runs.
class ChoiceProbe : public Op {
 public:
  explicit ChoiceProbe(std::vector<CudaKernels>* seen) : seen_(seen) {}
  void run() override { seen_->push_back(cuda_kernels()); }
  CheckResult check() override {
    run();
    return CheckResult{"probe"};
  }
  double bytes() const override { return 0; }

 private:
  std::vector<CudaKernels>* seen_;
};

TEST(KernelTable, ChoiceOpRunsUnderItsChoiceAndPutsTheOldOneBack) {
  std::vector<CudaKernels> seen;
  ASSERT_EQ(cuda_kernels(), CudaKernels::Library);
  ChoiceOp op(CudaKernels::Engine, std::make_unique<ChoiceProbe>(&seen));
  op.run();
  EXPECT_TRUE(op.check().ok());
  EXPECT_EQ(seen, (std::vector<CudaKernels>{CudaKernels::Engine, CudaKernels::Engine}));
  EXPECT_EQ(cuda_kernels(), CudaKernels::Library);
}

TEST(KernelTable, RunCheckTurnsAnExceptionIntoAFailure) {
  KernelCase c;
  c.name = "broken";
  c.make = [](int) -> std::unique_ptr<Op> { throw std::runtime_error("no such kernel"); };
  const CheckResult r = run_check(c, -1);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "broken threw: no such kernel");
  EXPECT_EQ(unavailable(c, 0), "a CPU case: not checked on CUDA");
}

}  // namespace
}  // namespace engine::kernels::testing
