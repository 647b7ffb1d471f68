// core/cuda/copy.cu: copies between host memory and device memory, in any direction.
#include <cstring>

#include "core/cuda/check.cuh"
#include "core/cuda/h2d_staging.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/sync_guard.h"

namespace engine::cuda {

// Every copy touching a device is queued on that device's compute stream, so it is ordered with
// the kernels before and after it without any host wait, except where the host needs the bytes:
//   host -> device: staged through the device's pinned ring (core/cuda/h2d_staging.cuh), so the
//     caller may free or reuse the source at once, and nothing waits for queued compute;
//   device -> host: waits for the compute stream (the host is about to read dst);
//   device -> same device: queued, no wait;
//   device -> other device: the destination's compute stream waits for the source's (an event),
//     the peer copy runs there, and the source's stream waits for the copy before it may reuse
//     the source block (the caching allocator relies on one order per device).
void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, nbytes);
  } else if (src_dev.is_cpu()) {
    upload_pageable(dst, src, nbytes, dst_dev.index);
  } else if (dst_dev.is_cpu()) {
    sync_guard::note("device -> host copy (cuda::copy)");
    DeviceGuard guard(src_dev.index);
    cudaStream_t s = compute_stream(src_dev.index);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
  } else if (dst_dev.index == src_dev.index) {
    DeviceGuard guard(dst_dev.index);
    CUDA_CHECK(
        cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, compute_stream(dst_dev.index)));
  } else {
    const int from = src_dev.index, to = dst_dev.index;
    cudaEvent_t src_ready = nullptr, copied = nullptr;
    {
      DeviceGuard guard(from);
      CUDA_CHECK(cudaEventCreateWithFlags(&src_ready, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventRecord(src_ready, compute_stream(from)));
    }
    {
      DeviceGuard guard(to);
      cudaStream_t s = compute_stream(to);
      CUDA_CHECK(cudaStreamWaitEvent(s, src_ready, 0));
      // Works with or without peer access enabled (staged through the host when it is not).
      CUDA_CHECK(cudaMemcpyPeerAsync(dst, to, src, from, nbytes, s));
      CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventRecord(copied, s));
    }
    DeviceGuard guard(from);
    CUDA_CHECK(cudaStreamWaitEvent(compute_stream(from), copied, 0));
    // Destroying a recorded event is fine: its resources go once the work it marks is done.
    CUDA_CHECK(cudaEventDestroy(src_ready));
    CUDA_CHECK(cudaEventDestroy(copied));
  }
}

}  // namespace engine::cuda
