// kernels/testing/table.h: owns the kernel-case table, as ggml's test-backend-ops: each op's cases
// (shapes, passes, precisions, devices) written once, run in two modes. Check mode builds a
// case's Op on the CPU (the optimised kernels) or on a CUDA device and compares its outputs with
// kernels/cpu/reference.h under the normalised error tolerance (check.h): the tests run every
// check case (tests/kernels/test_kernel_table.cpp), gpu_selftest runs them on its device. Perf
// mode is bench_kernels: it times the perf cases (the models' layers at their batch sizes), each
// checked once before it is timed. The Ops: ops_gemm_conv.h, ops_elementwise.h, ops_optim.h
// (CPU), ops_cuda.h (CUDA); the models' layer shapes: sites.h.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/testing/check.h"
#include "kernels/testing/ops_optim.h"
#include "kernels/testing/sites.h"

namespace engine::kernels::testing {

// What perf mode reports a case's speed against: the machine's GFLOP/s (GEMM-shaped ops), its
// copy bandwidth, or one thread's bandwidth (the reduce step, which runs on one thread).
enum class Ceiling { Compute, Memory, MemoryOneThread };

// One case: an op at one shape (and pass, precision, algorithm), on the CPU and perhaps on CUDA.
struct KernelCase {
  std::string name;  // unique in its list, e.g. "conv2d/simplecnn.conv2/bwd_weight/b128"
  Ceiling ceiling = Ceiling::Memory;
  Precision precision = Precision::FP32;  // BF16 needs AVX512_BF16 (CPU only)
  bool cpu = true;                        // runs on the CPU
  bool cuda = false;                      // runs on a CUDA device too
  // A CUDA case run under CudaKernels::Engine (kernels/choice.h): the twin of the case named
  // as this one less its "/engine" suffix, which runs the library's kernels.
  bool engine = false;
  // The case's Op with its inputs: the CPU kernels when device < 0, else on cuda:device.
  std::function<std::unique_ptr<Op>(int device)> make;
};

// The cases the tests check: the models' layers at batch 2-8 and awkward shapes (odd sizes,
// strides, empty batches, every CPU convolution algorithm that takes the shape).
std::vector<KernelCase> check_cases();

// What perf mode needs from outside the kernels layer: the models' parameter sizes (the update
// cases; nn::make_model's) and, when given, comm's reduce step, timed beside the kernels' one.
struct PerfInputs {
  std::vector<ModelParams> params;
  ReduceSumFn comm_reduce = nullptr;
};

// bench_kernels' cases, in its row order; names are family/model.layer/pass/bN, e.g.
// conv2d/simplecnn.conv2/bwd_weight/b128. BF16 cases only where the CPU has AVX512_BF16.
std::vector<KernelCase> perf_cases(const PerfInputs& in);

// Why the case cannot run on device (-1: the CPU) here, or "" when it can: a case that does not
// run on that kind of device, a CPU without AVX512_BF16, no CUDA device.
std::string unavailable(const KernelCase& c, int device);

// Check mode: the case's Op on device (-1: the CPU), compared with the reference. An exception is
// a failed result whose message is the exception's.
CheckResult run_check(const KernelCase& c, int device);

// The case's name as a GoogleTest parameter name: letters, digits and '_' only.
std::string test_name(const std::string& name);

}  // namespace engine::kernels::testing
