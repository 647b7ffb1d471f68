// kernels/cuda/handles.cu: per-device cuBLAS, cuBLASLt and cuDNN handles, and the two check
// functions.
#include <array>
#include <mutex>

#include "core/cuda_backend.h"
#include "core/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/handles.cuh"

namespace engine::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct Handles {
  std::once_flag blas_once, dnn_once, lt_once;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
};

Handles& handles(int device) {
  check_cuda_device(device);
  ENGINE_CHECK(device < kMaxDevices, "cuda:", device, ": at most ", kMaxDevices, " devices");
  static auto* all = new std::array<Handles, kMaxDevices>();
  return (*all)[device];
}

}  // namespace

void cublas_fail(cublasStatus_t st, const char* expr, const char* file, int line) {
  throw Error(detail::concat("cuBLAS error at ", file, ":", line, ": ", expr, ": ",
                             cublasGetStatusString(st), " (", cublasGetStatusName(st), ")"));
}

void cudnn_fail(cudnnStatus_t st, const char* expr, const char* file, int line) {
  char last[512] = "";
  cudnnGetLastErrorString(last, sizeof last);
  throw Error(detail::concat("cuDNN error at ", file, ":", line, ": ", expr, ": ",
                             cudnnGetErrorString(st), last[0] ? " - " : "", last));
}

cublasHandle_t cublas_handle(int device) {
  Handles& h = handles(device);
  std::call_once(h.blas_once, [&] {
    ::engine::cuda::DeviceGuard guard(device);
    cublasHandle_t b = nullptr;
    CUBLAS_CHECK(cublasCreate(&b));
    CUBLAS_CHECK(cublasSetStream(b, ::engine::cuda::compute_stream(device)));
    // Plain FP32 (the default math mode never uses TF32 tensor cores), so results stay within
    // float rounding of the CPU's.
    CUBLAS_CHECK(cublasSetMathMode(b, CUBLAS_DEFAULT_MATH));
    h.blas = b;
  });
  return h.blas;
}

cublasLtHandle_t cublaslt_handle(int device) {
  Handles& h = handles(device);
  std::call_once(h.lt_once, [&] {
    ::engine::cuda::DeviceGuard guard(device);
    cublasLtHandle_t lt = nullptr;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    h.lt = lt;
  });
  return h.lt;
}

cudnnHandle_t cudnn_handle(int device) {
  Handles& h = handles(device);
  std::call_once(h.dnn_once, [&] {
    ::engine::cuda::DeviceGuard guard(device);
    cudnnHandle_t d = nullptr;
    CUDNN_CHECK(cudnnCreate(&d));
    CUDNN_CHECK(cudnnSetStream(d, ::engine::cuda::compute_stream(device)));
    h.dnn = d;
  });
  return h.dnn;
}

}  // namespace engine::kernels::cuda
