// kernels/testing/case_list.h: what the check and perf tables (table_check.cpp, table_perf.cpp)
// share to write their cases: a list to add to, and the factory of an op's CPU or CUDA Op; the
// engine twins of CUDA cases (CudaKernels::Engine, kernels/choice.h).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/choice.h"
#include "kernels/testing/ops_cuda.h"
#include "kernels/testing/ops_elementwise.h"
#include "kernels/testing/ops_gemm_conv.h"
#include "kernels/testing/ops_optim.h"
#include "kernels/testing/table.h"

namespace engine::kernels::testing {

using MakeOp = std::function<std::unique_ptr<Op>(int device)>;

// The CPU Op when device < 0, else its CUDA twin on cuda:device: a case on both.
template <class CpuOp, class CudaOp, class... Args>
MakeOp either(Args... args) {
  return [=](int device) -> std::unique_ptr<Op> {
    if (device >= 0) return std::make_unique<CudaOp>(device, args...);
    return std::make_unique<CpuOp>(args...);
  };
}

// The CPU Op alone: a case with no CUDA kernel (or whose CUDA twin is not checked there).
template <class CpuOp, class... Args>
MakeOp cpu_op(Args... args) {
  return [=](int) -> std::unique_ptr<Op> { return std::make_unique<CpuOp>(args...); };
}

// An Op whose calls run under the process choice `k` (kernels/choice.h), which it then puts back.
class ChoiceOp : public Op {
 public:
  ChoiceOp(CudaKernels k, std::unique_ptr<Op> op) : k_(k), op_(std::move(op)) {}
  void run() override {
    Scoped s(k_);
    op_->run();
  }
  CheckResult check() override {
    Scoped s(k_);
    return op_->check();
  }
  double flops() const override { return op_->flops(); }
  double bytes() const override { return op_->bytes(); }

  // Sets the choice for its lifetime.
  class Scoped {
   public:
    explicit Scoped(CudaKernels k) : old_(cuda_kernels()) { set_cuda_kernels(k); }
    ~Scoped() { set_cuda_kernels(old_); }
    Scoped(const Scoped&) = delete;
    Scoped& operator=(const Scoped&) = delete;

   private:
    CudaKernels old_;
  };

 private:
  CudaKernels k_;
  std::unique_ptr<Op> op_;
};

class CaseList {
 public:
  // A case on the CPU (unless not cpu) and, when cuda, on a CUDA device.
  void add(std::string name, Ceiling ceiling, MakeOp make, bool cuda,
           Precision precision = Precision::FP32, bool cpu = true) {
    KernelCase c;
    c.name = std::move(name);
    c.ceiling = ceiling;
    c.precision = precision;
    c.cpu = cpu;
    c.cuda = cuda;
    c.make = std::move(make);
    cases_.push_back(std::move(c));
  }
  // The CUDA case `name`/engine: make's Op under CudaKernels::Engine (not on the CPU).
  void add_engine(const std::string& name, Ceiling ceiling, MakeOp make) {
    KernelCase c;
    c.name = name + "/engine";
    c.ceiling = ceiling;
    c.cpu = false;
    c.cuda = true;
    c.engine = true;
    c.make = [make](int device) -> std::unique_ptr<Op> {
      ChoiceOp::Scoped s(CudaKernels::Engine);
      return std::make_unique<ChoiceOp>(CudaKernels::Engine, make(device));
    };
    cases_.push_back(std::move(c));
  }
  std::vector<KernelCase> take() { return std::move(cases_); }

 private:
  std::vector<KernelCase> cases_;
};

// Forward, the input gradient, the weight gradient: of linear and conv2d alike.
constexpr ConvPass kPasses[] = {ConvPass::Forward, ConvPass::BackwardInput,
                                ConvPass::BackwardWeight};

inline std::string dir_name(bool backward) {
  return backward ? "bwd" : "fwd";
}

}  // namespace engine::kernels::testing
