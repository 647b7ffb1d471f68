// kernels/cuda/handles.cuh: the cuBLAS, cuBLASLt and cuDNN handle of each device, created lazily on
// first use, bound to the device's compute stream, never destroyed (the driver may be gone at
// exit). A handle is used from one host thread at a time: the engine computes on one thread per
// rank.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

namespace engine::kernels::cuda {

cublasHandle_t cublas_handle(int device);
// cuBLASLt (CudaKernels::Engine); its calls take the stream themselves.
cublasLtHandle_t cublaslt_handle(int device);
cudnnHandle_t cudnn_handle(int device);

}  // namespace engine::kernels::cuda
