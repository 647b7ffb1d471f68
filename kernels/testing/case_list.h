// kernels/testing/case_list.h: what the check and perf tables (table_check.cpp, table_perf.cpp)
// share to write their cases: a list to add to, and the factory of an op's CPU or CUDA Op.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

class CaseList {
 public:
  // A case on the CPU and, when cuda, on a CUDA device.
  void add(std::string name, Ceiling ceiling, MakeOp make, bool cuda,
           Precision precision = Precision::FP32) {
    KernelCase c;
    c.name = std::move(name);
    c.ceiling = ceiling;
    c.precision = precision;
    c.cuda = cuda;
    c.make = std::move(make);
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
