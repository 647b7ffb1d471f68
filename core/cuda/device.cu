// core/cuda/device.cu: device discovery. The answer is taken once per process: the set of
// devices a process sees does not change while it runs.
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/cuda/check.cuh"
#include "core/cuda_backend.h"
#include "core/device.h"
#include "core/error.h"

namespace engine::cuda {
namespace {

struct Discovery {
  int count = 0;
  std::string reason;  // "" when count > 0
};

// Whether the driver library is there at all (the runtime loads it by this name).
bool driver_library_loads() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) return false;
  dlclose(h);
  return true;
}

const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      r.count = 0;
      int driver = 0, runtime = 0;
      (void)cudaDriverGetVersion(&driver);
      (void)cudaRuntimeGetVersion(&runtime);
      (void)cudaGetLastError();
      r.reason = cuda_absence_reason(cudaGetErrorString(err), err == cudaErrorInsufficientDriver,
                                     driver_library_loads(), driver, runtime);
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
