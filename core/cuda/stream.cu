// core/cuda/stream.cu: per-device compute and communication streams (see stream.cuh).
#include <array>
#include <mutex>

#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceStreams {
  std::once_flag once;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  cudaStream_t copy = nullptr;
  std::mutex event_mu;
  cudaEvent_t event = nullptr;  // reused for every cross-stream wait (guarded by event_mu)
};

DeviceStreams& streams(int device) {
  ENGINE_CHECK(device >= 0 && device < kMaxDevices && device < device_count(), "cuda:", device,
               " is not a device of this process (", device_count(), " CUDA devices; ",
               unavailable_reason(), ")");
  static auto* all = new std::array<DeviceStreams, kMaxDevices>();
  DeviceStreams& s = (*all)[device];
  std::call_once(s.once, [&] {
    DeviceGuard guard(device);
    // Compute is a blocking stream (ordered with the legacy default stream, which libraries
    // may use); comm and copy are non-blocking, ordered by events only, so that a collective or
    // an upload runs beside compute instead of being serialised with the legacy stream.
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.compute, cudaStreamDefault));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.comm, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.copy, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming));
  });
  return s;
}

}  // namespace

cudaStream_t compute_stream(int device) {
  return streams(device).compute;
}

cudaStream_t comm_stream(int device) {
  return streams(device).comm;
}

cudaStream_t copy_stream(int device) {
  return streams(device).copy;
}

void stream_wait(int device, cudaStream_t waiter, cudaStream_t signaller) {
  DeviceStreams& s = streams(device);
  DeviceGuard guard(device);
  // cudaStreamWaitEvent captures the event's state at the call, so one event can be re-recorded
  // right after; the mutex keeps record and wait of one pair together.
  std::lock_guard<std::mutex> lock(s.event_mu);
  CUDA_CHECK(cudaEventRecord(s.event, signaller));
  CUDA_CHECK(cudaStreamWaitEvent(waiter, s.event, 0));
}

void synchronize_compute(int device) {
  DeviceGuard guard(device);
  CUDA_CHECK(cudaStreamSynchronize(compute_stream(device)));
}

}  // namespace engine::cuda
