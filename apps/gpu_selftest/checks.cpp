// apps/gpu_selftest/checks.cpp: see checks.h. The kernel, op and model checks are the CUDA test
// suite's GoogleTest cases, run here with a listener that turns each case into a table row; the
// NCCL checks are this file's.
#include "apps/gpu_selftest/checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <functional>
#include <memory>

#include "comm/backends/nccl/nccl_group.h"
#include "comm/rendezvous/mem_store.h"
#include "core/tensor.h"
#include "tests/common/test_util.h"

namespace engine::selftest {
namespace {

// rel_error as the test cases compute it (tests/common/test_util.h), for the NCCL checks.
double rel_error(const Tensor& got, const Tensor& want) {
  return engine::testing::rel_error(got.to_vector(), want.to_vector());
}

// Runs `body`, which returns the error; any exception is a failure with its message.
CheckResult run_check(const std::string& group, const std::string& name, double tol,
                      const std::function<double()>& body) {
  CheckResult r{group, name, Outcome::Fail, 0, tol, ""};
  try {
    r.error = body();
    r.outcome = r.error <= tol ? Outcome::Pass : Outcome::Fail;
    if (r.outcome == Outcome::Fail) r.detail = "error above tolerance";
  } catch (const std::exception& e) {
    r.error = INFINITY;
    r.detail = e.what();
  }
  return r;
}

// The first line of a failure message.
std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

// One CheckResult per finished test case, with its first failure (or skip) message and place.
class Collector : public ::testing::EmptyTestEventListener {
 public:
  explicit Collector(std::vector<CheckResult>* out) : out_(out) {}
  void OnTestStart(const ::testing::TestInfo&) override { note_.clear(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!note_.empty() || !(r.failed() || r.skipped())) return;
    note_ = first_line(r.message() ? r.message() : "");
    if (r.failed() && r.file_name())
      note_ += std::string(" (") + r.file_name() + ":" + std::to_string(r.line_number()) + ")";
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    const std::string suite = t.test_suite_name(), name = t.name();
    CheckResult r;
    r.group = suite == "CudaKernels"                    ? "kernel"
              : name.find("Model") != std::string::npos ? "model"
                                                        : "op";
    r.name = suite + "." + name;
    r.outcome = t.result()->Failed()    ? Outcome::Fail
                : t.result()->Skipped() ? Outcome::Skip
                                        : Outcome::Pass;
    r.detail = note_;
    out_->push_back(r);
  }

 private:
  std::vector<CheckResult>* out_;
  std::string note_;
};

}  // namespace

std::vector<CheckResult> run_test_cases(Device dev) {
  engine::testing::cuda_test_device() = dev;
  int argc = 1;
  char name[] = "gpu_selftest";
  char* argv[] = {name, nullptr};
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(filter, "CudaKernels.*:DeviceOps.*");
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());  // the table is the report
  std::vector<CheckResult> out;
  listeners.Append(new Collector(&out));  // gtest owns it
  if (RUN_ALL_TESTS() != 0 && out.empty())
    out.push_back(
        {"op", "test cases", Outcome::Fail, 0, 0, "GoogleTest could not run the test cases"});
  return out;
}

std::vector<CheckResult> run_nccl_checks(Device dev) {
  std::vector<CheckResult> out;
  std::unique_ptr<comm::NcclGroup> nccl;
  out.push_back(run_check("nccl", "init (world 1, unique id via store)", 0, [&] {
    nccl = std::make_unique<comm::NcclGroup>(std::make_shared<comm::MemStore>(), 0, 1, dev.index);
    return 0.0;
  }));
  if (!nccl) return out;
  const std::vector<float> v{1.f, -2.f, 3.5f, 0.25f, 7.f};
  out.push_back(run_check("nccl", "all_reduce sum", 0, [&] {
    Tensor t = Tensor::from_vector(v, {5}, dev);
    nccl->all_reduce(t, comm::ReduceOp::Sum);
    return rel_error(t, Tensor::from_vector(v, {5}));
  }));
  out.push_back(run_check("nccl", "all_reduce avg", 0, [&] {
    Tensor t = Tensor::from_vector(v, {5}, dev);
    nccl->all_reduce(t, comm::ReduceOp::Avg);
    return rel_error(t, Tensor::from_vector(v, {5}));
  }));
  out.push_back(run_check("nccl", "broadcast / all_gather / reduce_scatter", 0, [&] {
    Tensor t = Tensor::from_vector(v, {5}, dev), g = Tensor::zeros({5}, DType::F32, dev);
    nccl->broadcast(t, 0);
    nccl->all_gather(t, g);
    Tensor rs = Tensor::zeros({5}, DType::F32, dev);
    nccl->reduce_scatter(g, rs);
    return std::max(rel_error(g, Tensor::from_vector(v, {5})),
                    rel_error(rs, Tensor::from_vector(v, {5})));
  }));
  return out;
}

}  // namespace engine::selftest
