// core/cuda/device.cu: device discovery. The answer is taken once per process: the set of
// devices a process sees does not change while it runs.
#include <mutex>
#include <string>

#include "core/cuda/check.cuh"
#include "core/cuda_backend.h"

namespace engine::cuda {
namespace {

struct Discovery {
  int count = 0;
  std::string reason;  // "" when count > 0
};

const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      r.count = 0;
      r.reason = std::string("no CUDA device: ") + cudaGetErrorString(err);
    } else if (r.count == 0) {
      r.reason = "no CUDA device: the driver reports 0 devices";
    }
    return r;
  }();
  return d;
}

}  // namespace

int device_count() {
  return discovery().count;
}

std::string unavailable_reason() {
  return discovery().reason;
}

std::string device_uuid(int device) {
  check_cuda_device(device, "device_uuid");
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.uuid.bytes, sizeof prop.uuid.bytes);
}

bool can_access_peer(int device, int peer) {
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  return can != 0;
}

}  // namespace engine::cuda
