// core/cuda/check.cu: the one function every CUDA_CHECK failure goes through, and DeviceGuard.
#include <cstdio>

#include "core/cuda/check.cuh"
#include "core/error.h"

namespace engine::cuda {

void fail(cudaError_t err, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();  // reset the last-error slot (sticky errors stay regardless)
  throw Error(detail::concat("CUDA error at ", file, ":", line, ": ", expr, ": ",
                             cudaGetErrorString(err), " (", cudaGetErrorName(err), ")"));
}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device_) CUDA_CHECK(cudaSetDevice(device_));
}

DeviceGuard::~DeviceGuard() {
  if (prev_ == device_) return;
  const cudaError_t err = cudaSetDevice(prev_);
  if (err != cudaSuccess)
    std::fprintf(stderr, "engine: could not restore CUDA device %d: %s\n", prev_,
                 cudaGetErrorString(err));
}

}  // namespace engine::cuda
