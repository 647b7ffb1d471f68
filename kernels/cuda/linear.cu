// kernels/cuda/linear.cu: the fully connected layer on cuBLAS SGEMM.
//
// cuBLAS is column-major; our tensors are row-major. A row-major (R, C) matrix is, byte for byte,
// the column-major (C, R) matrix of its transpose. So each row-major product is computed as the
// transposed product in column-major, with no copies:
//   forward      y (N,out) = x w^T      <=>  y^T (out,N) = w x^T      : gemm(T, N, out, N, in)
//   backward dx  dx (N,in) = dy w       <=>  dx^T (in,N) = w^T dy^T   : gemm(N, N, in, N, out)
//   backward dw  dw (out,in) = dy^T x   <=>  dw^T (in,out) = x^T dy   : gemm(N, T, in, out, N)
// where w (out,in) row-major is w^T (in,out) column-major with ld = in, x^T is x with ld = in,
// and dy^T is dy with ld = out.
// CudaKernels::Engine: the forward on cuBLASLt with the bias in its epilogue (linear_lt.cu), the
// weight gradient the engine's fixed-order kernel (wgrad.cu).
#include "core/error.h"
#include "kernels/choice.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/internal.cuh"
#include "kernels/cuda/ops.h"

namespace engine::kernels::cuda {
namespace {

int i32(int64_t v) {
  return static_cast<int>(v);
}

__global__ void broadcast_rows_kernel(const float* b, float* y, int64_t rows, int64_t cols) {
  for (ENGINE_GRID_LOOP(i, rows * cols)) y[i] = b[i % cols];
}

}  // namespace

namespace detail {

void check_linear(const LinearShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.in > 0 && s.out > 0, what, ": bad shape (n ", s.n, ", in ", s.in,
               ", out ", s.out, ")");
  ENGINE_CHECK(s.n <= INT32_MAX && s.in <= INT32_MAX && s.out <= INT32_MAX, what,
               ": dimension over 2^31 for cuBLAS");
}

void broadcast_rows(int device, const float* b, float* y, int64_t rows, int64_t cols) {
  broadcast_rows_kernel<<<blocks_for(rows * cols), kThreads, 0,
                          ::engine::cuda::compute_stream(device)>>>(b, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

}  // namespace detail

void linear_forward(int device, const float* x, const float* w, const float* b, float* y,
                    const LinearShape& s) {
  detail::check_linear(s, "cuda::linear_forward");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  if (cuda_kernels() == CudaKernels::Engine)
    return detail::engine_linear_forward(device, x, w, b, y, s, false);
  float beta = 0.f;
  if (b) {  // y = b broadcast, then y += x w^T
    detail::broadcast_rows(device, b, y, s.n, s.out);
    beta = 1.f;
  }
  const float alpha = 1.f;
  CUBLAS_CHECK(cublasSgemm(cublas_handle(device), CUBLAS_OP_T, CUBLAS_OP_N, i32(s.out), i32(s.n),
                           i32(s.in), &alpha, w, i32(s.in), x, i32(s.in), &beta, y, i32(s.out)));
}

void linear_backward_data(int device, const float* dy, const float* w, float* dx,
                          const LinearShape& s) {
  detail::check_linear(s, "cuda::linear_backward_data");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasSgemm(cublas_handle(device), CUBLAS_OP_N, CUBLAS_OP_N, i32(s.in), i32(s.n),
                           i32(s.out), &alpha, w, i32(s.in), dy, i32(s.out), &beta, dx, i32(s.in)));
}

void linear_backward_weight(int device, const float* dy, const float* x, float* dw,
                            const LinearShape& s, float beta) {
  detail::check_linear(s, "cuda::linear_backward_weight");
  ::engine::cuda::DeviceGuard guard(device);
  if (cuda_kernels() == CudaKernels::Engine)
    return detail::engine_linear_wgrad(device, dy, x, dw, s, beta, false);
  // No samples: dw = beta * dw, zeros when beta is 0 (as the CPU), not left to cuBLAS with k = 0.
  if (s.n == 0) return detail::scale_or_zero(device, dw, s.out * s.in, beta);
  const float alpha = 1.f;
  CUBLAS_CHECK(cublasSgemm(cublas_handle(device), CUBLAS_OP_N, CUBLAS_OP_T, i32(s.in), i32(s.out),
                           i32(s.n), &alpha, x, i32(s.in), dy, i32(s.out), &beta, dw, i32(s.in)));
}

void linear_backward_bias(int device, const float* dy, float* db, const LinearShape& s,
                          float beta) {
  detail::check_linear(s, "cuda::linear_backward_bias");
  // dy (N, out) is (N, C = out, HW = 1).
  detail::channel_sum(device, dy, db, s.n, s.out, 1, beta);
}

}  // namespace engine::kernels::cuda
