// core/cuda/copy.cu: copies between host memory and device memory, in any direction.
#include <cstring>

#include "core/cuda/check.cuh"
#include "core/cuda_backend.h"

namespace engine::cuda {

// Host<->device copies with cudaMemcpy from pageable memory return once the host buffer may be
// reused (device->host: once the data is there). Device->device copies are queued, so they are
// followed by a synchronisation: the contract is "synchronous for the caller".
void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, nbytes);
  } else if (src_dev.is_cpu()) {
    DeviceGuard guard(dst_dev.index);
    CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
  } else if (dst_dev.is_cpu()) {
    DeviceGuard guard(src_dev.index);
    CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
  } else if (dst_dev.index == src_dev.index) {
    DeviceGuard guard(dst_dev.index);
    CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    // Works with or without peer access enabled (staged through the host when it is not).
    CUDA_CHECK(cudaMemcpyPeer(dst, dst_dev.index, src, src_dev.index, nbytes));
    {
      DeviceGuard guard(src_dev.index);
      CUDA_CHECK(cudaDeviceSynchronize());
    }
    DeviceGuard guard(dst_dev.index);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace engine::cuda
