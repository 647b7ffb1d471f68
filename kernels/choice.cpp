// kernels/choice.cpp: the process's choice of CUDA kernels (kernels/choice.h).
#include "kernels/choice.h"

#include <atomic>

#include "core/error.h"

namespace engine::kernels {
namespace {
std::atomic<CudaKernels> g_choice{CudaKernels::Library};
}  // namespace

void set_cuda_kernels(CudaKernels k) {
  g_choice.store(k, std::memory_order_relaxed);
}
CudaKernels cuda_kernels() {
  return g_choice.load(std::memory_order_relaxed);
}
const char* cuda_kernels_name(CudaKernels k) {
  return k == CudaKernels::Engine ? "engine" : "library";
}
CudaKernels parse_cuda_kernels(const std::string& name) {
  if (name == "library") return CudaKernels::Library;
  if (name == "engine") return CudaKernels::Engine;
  throw Error("CUDA kernels '" + name + "': expected library|engine");
}

}  // namespace engine::kernels
