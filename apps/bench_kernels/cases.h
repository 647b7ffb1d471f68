// apps/bench_kernels/cases.h: owns the registration of bench_kernels' cases with Google Benchmark.
// Each case builds its Op and checks it against the reference the first time it runs; a case
// whose check fails (or throws) is never timed: it is skipped with the error and recorded.
#pragma once
#include <string>
#include <vector>

#include "apps/bench_kernels/ceiling.h"
#include "apps/bench_kernels/cuda_ceiling.h"

namespace engine::bench {

// One failed check: the case and what went wrong (the worst element, or the exception).
struct Failure {
  std::string name, message;
};

// Registers every CPU case; failures are appended to *failures as cases run.
// Names: family/model.layer/pass/bN, e.g. conv2d/simplecnn.conv2/bwd_weight/b128.
void register_cpu_cases(const Ceilings& ceilings, std::vector<Failure>* failures);

// Registers the CUDA cases on cuda:`ceilings.device`, under the CPU cases' names: the same
// linear, conv2d, pooling, relu, batch-norm, loss, dropout and optimizer cases and the reduce step
// (kernels' only: comm's runs on the host), each checked against the same reference. IDX
// decoding and normalisation have no device kernel and are not registered. Each timed run queues
// its calls on the compute stream and synchronises it before the clock is read; % of ceiling is
// of cuBLAS SGEMM (GEMM-shaped ops) or of the device-to-device copy (the rest).
// which: "library" (the rows as before), "engine" (the /engine rows, --cuda-kernels engine,
// in place of the library rows they twin) or "both" (each library row, then its /engine twin).
void register_cuda_cases(const CudaCeilings& ceilings, const std::string& which,
                         std::vector<Failure>* failures);

}  // namespace engine::bench
