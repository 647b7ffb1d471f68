// apps/gpu_selftest/cases.cpp: the kernel-case table on the device (checks.h run_table_cases):
// each case marked for CUDA checked against the CPU reference, one row each.
#include "apps/gpu_selftest/checks.h"
#include "kernels/testing/table.h"

namespace engine::selftest {

std::vector<CheckResult> run_table_cases(Device dev) {
  namespace kt = kernels::testing;
  std::vector<CheckResult> out;
  for (const kt::KernelCase& c : kt::check_cases()) {
    if (!c.cuda) continue;
    const kt::CheckResult r = kt::run_check(c, dev.index);
    out.push_back({"case", c.name, r.ok() ? Outcome::Pass : Outcome::Fail, r.err, r.tol,
                   r.ok() ? "" : r.message()});
  }
  return out;
}

}  // namespace engine::selftest
