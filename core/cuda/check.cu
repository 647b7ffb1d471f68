// core/cuda/check.cu: the one function every CUDA_CHECK failure goes through, DeviceGuard, and
// the process's home device (core/cuda_backend.h).
#include <atomic>
#include <cstdio>

#include "core/cuda/check.cuh"
#include "core/error.h"

namespace engine::cuda {

void fail(cudaError_t err, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();  // reset the last-error slot (sticky errors stay regardless)
  throw Error(detail::concat("CUDA error at ", file, ":", line, ": ", expr, ": ",
                             cudaGetErrorString(err), " (", cudaGetErrorName(err), ")"));
}

namespace {

// Whether engine code has made a device current on this thread (cudaGetDevice answers 0 on a
// thread that never set one, without that being anyone's choice).
thread_local bool tl_device_set = false;
std::atomic<int> g_home_device{-1};

}  // namespace

void set_thread_device(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  tl_device_set = true;
}

void set_home_device(int device) {
  g_home_device.store(device);
  set_thread_device(device);
}

int home_device() {
  return g_home_device.load();
}

void enter_home_device() noexcept {
  const int d = g_home_device.load();
  if (d < 0 || tl_device_set) return;
  if (cudaSetDevice(d) == cudaSuccess)
    tl_device_set = true;
  else
    (void)cudaGetLastError();  // the thread's first CUDA call reports it again, with context
}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  if (!tl_device_set) {  // keep it: see check.cuh
    set_thread_device(device);
    prev_ = device;
    return;
  }
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
