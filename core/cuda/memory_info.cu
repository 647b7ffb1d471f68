// core/cuda/memory_info.cu: how much memory a device has free (core/cuda_backend.h).
#include "core/cuda/check.cuh"
#include "core/cuda_backend.h"

namespace engine::cuda {

size_t free_memory(int device) {
  check_cuda_device(device);
  DeviceGuard guard(device);
  size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

}  // namespace engine::cuda
