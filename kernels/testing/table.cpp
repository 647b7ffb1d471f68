// kernels/testing/table.cpp: check mode (table.h): where a case can run, and its check.
#include "kernels/testing/table.h"

#include <cctype>
#include <exception>
#include <limits>

#include "core/device.h"
#include "kernels/cpu/cpu_features.h"

namespace engine::kernels::testing {

std::string unavailable(const KernelCase& c, int device) {
  if (device < 0) {
    if (!c.cpu) return "a CUDA case";
    if (c.precision == Precision::BF16 && !cpu::has_avx512_bf16())
      return "this CPU has no AVX512_BF16";
    return "";
  }
  if (!c.cuda) return "a CPU case: not checked on CUDA";
  return cuda_device_problem(device);
}

CheckResult run_check(const KernelCase& c, int device) {
  try {
    std::unique_ptr<Op> op = c.make(device);
    return op->check();
  } catch (const std::exception& e) {
    CheckResult r{c.name, std::numeric_limits<double>::infinity(), 0.0};
    r.error = e.what();
    return r;
  }
}

std::string test_name(const std::string& name) {
  std::string s = name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

}  // namespace engine::kernels::testing
