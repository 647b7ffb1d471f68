// core/cuda/check.cuh: CUDA_CHECK, the one way engine code checks a CUDA runtime call, and
// DeviceGuard, which makes a device current for a scope. Plain C++ may include it too.
#pragma once
#include <cuda_runtime_api.h>

namespace engine::cuda {

// Throws engine::Error "CUDA error at FILE:LINE: EXPR: <cudaGetErrorString> (<name>)".
// Clears the runtime's last-error slot first, so a non-sticky error is not reported twice.
[[noreturn]] void fail(cudaError_t err, const char* expr, const char* file, int line);

// Makes `device` current until the end of the scope, then restores the previous device. On a
// thread that no engine code has given a device yet, the runtime's "current device" is only its
// default (0), not a choice: restoring it would create a context on GPU 0 in a process that may
// never use it. There the guard keeps `device` current for good instead (the thread's device is
// set once, to the first device it works on: the rank's). The destructor never throws: a failed
// restore is logged to stderr.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
  int device_ = -1;
};

}  // namespace engine::cuda

// CUDA_CHECK(cudaMalloc(&p, n)): throws engine::Error naming file, line, call and error.
#define CUDA_CHECK(expr)                                                 \
  do {                                                                   \
    const cudaError_t engine_cuda_err_ = (expr);                         \
    if (engine_cuda_err_ != cudaSuccess)                                 \
      ::engine::cuda::fail(engine_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: a bad configuration shows up here, not at the next unrelated call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
