// core/device.cpp: device parsing and CUDA availability.
#include "core/device.h"

#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    std::string n = s.substr(5);
    ENGINE_CHECK(!n.empty() && n.find_first_not_of("0123456789") == std::string::npos,
                 "bad device '", s, "': expected cpu, cuda or cuda:N");
    return cuda(std::stoi(n));
  }
  ENGINE_FAIL("bad device '", s, "': expected cpu, cuda or cuda:N");
}

int cuda_device_count() {
  return cuda::device_count();
}
std::string cuda_unavailable_reason() {
  return cuda::unavailable_reason();
}

namespace {
std::string cuda_version_str(int v) {
  return detail::concat(v / 1000, ".", v % 1000 / 10);
}
}  // namespace

std::string cuda_absence_reason(const std::string& runtime_error, bool insufficient_driver,
                                bool driver_present, int driver_version, int runtime_version) {
  if (!driver_present)
    return "no CUDA device: no NVIDIA driver is installed (libcuda.so.1 does not load)";
  if (insufficient_driver && driver_version > 0 && runtime_version > 0)
    return detail::concat("no CUDA device: the NVIDIA driver supports CUDA up to ",
                          cuda_version_str(driver_version), ", this build needs CUDA ",
                          cuda_version_str(runtime_version), " (", runtime_error, ")");
  return "no CUDA device: " + runtime_error;
}

std::string cuda_device_problem(int index) {
  const int n = cuda::device_count();
  if (index >= 0 && index < n) return "";
  if (n == 0)  // the reason first: "no CUDA device: ..."
    return detail::concat(cuda::unavailable_reason(), "; cuda:", index,
                          " is not a device of this process");
  return detail::concat("cuda:", index, " is not a device of this process (", n, " CUDA devices)");
}

void check_cuda_device(int index, const std::string& context) {
  const std::string problem = cuda_device_problem(index);
  ENGINE_CHECK(problem.empty(), context, context.empty() ? "" : ": ", problem);
}

}  // namespace engine
