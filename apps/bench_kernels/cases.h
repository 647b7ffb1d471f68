// apps/bench_kernels/cases.h: owns the registration of bench_kernels' cases with Google Benchmark.
// Each case builds its Op and checks it against the reference the first time it runs; a case
// whose check fails (or throws) is never timed: it is skipped with the error and recorded.
#pragma once
#include <string>
#include <vector>

#include "apps/bench_kernels/ceiling.h"

namespace engine::bench {

// One failed check: the case and what went wrong (the worst element, or the exception).
struct Failure {
  std::string name, message;
};

// Registers every CPU case; failures are appended to *failures as cases run.
// Names: family/model.layer/pass/bN, e.g. conv2d/simplecnn.conv2/bwd_weight/b128.
void register_cpu_cases(const Ceilings& ceilings, std::vector<Failure>* failures);

}  // namespace engine::bench
