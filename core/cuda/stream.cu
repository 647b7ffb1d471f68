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
};

DeviceStreams& streams(int device) {
  check_cuda_device(device);
  ENGINE_CHECK(device < kMaxDevices, "cuda:", device, ": at most ", kMaxDevices, " devices");
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

}  // namespace engine::cuda
