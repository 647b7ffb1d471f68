// kernels/cuda/bf16_ops.cu: the layers of bf16 precision on a GPU (kernels/cpu/bf16_ops.h has
// the contract: bf16-rounded operands, fp32 accumulation, fp32 results).
//   linear: operands converted to bf16 (round to nearest even) into blocks of the caching
//           allocator, then cublasGemmEx with CUDA_R_16BF operands, an fp32 output and
//           CUBLAS_COMPUTE_32F (tensor cores where the GPU has them).
//   conv2d: operands rounded to bf16 values held in fp32, then the fp32 cuDNN convolutions of
//           conv2d.cu (FMA math): the same numbers as the CPU's bf16 kernels, without cuDNN's
//           bf16 tensor-core path (its legacy API needs bf16 outputs too; not yet done).
//   CudaKernels::Engine: both weight gradients are the engine's fixed-order kernel
//           (wgrad.cu), which rounds each operand to bf16 as it loads it (fp32 sums); the linear
//           forward is cuBLASLt on the bf16 copies with the bias in its epilogue (linear_lt.cu);
//           conv2d's forward and input gradient are im2col + bf16 GemmEx (conv_bf16.cu).
// Row-major operands read as transposed column-major, as linear.cu explains.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "core/cuda_backend.h"
#include "core/error.h"
#include "kernels/choice.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/internal.cuh"
#include "kernels/cuda/ops.h"

namespace engine::kernels::cuda {
namespace {

__global__ void to_bf16_kernel(const float* src, __nv_bfloat16* dst, int64_t n) {
  for (ENGINE_GRID_LOOP(i, n)) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void round_bf16_kernel(const float* src, float* dst, int64_t n) {
  for (ENGINE_GRID_LOOP(i, n)) dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

// src (count floats) converted by `kernel` into a block of count T (one element at least).
template <class T, void (*kernel)(const float*, T*, int64_t)>
class Converted {
 public:
  Converted(int device, const float* src, int64_t count)
      : block_(device, static_cast<size_t>(count > 0 ? count : 1) * sizeof(T)) {
    if (count == 0) return;
    kernel<<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(src, get(),
                                                                                       count);
    CUDA_CHECK_LAUNCH();
  }
  T* get() const { return static_cast<T*>(block_.get()); }

 private:
  detail::DeviceBlock block_;
};
using Bf16Copy = Converted<__nv_bfloat16, to_bf16_kernel>;  // bf16 values
using RoundedCopy = Converted<float, round_bf16_kernel>;    // bf16 values held in fp32

// Dimensions are under 2^31: detail::check_linear saw to it.
int i32(int64_t v) {
  return static_cast<int>(v);
}

// C (m, n) column-major fp32 = op(A) op(B) + beta C, A and B bf16.
void gemm_bf16(int device, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
               int64_t k, const __nv_bfloat16* a, int64_t lda, const __nv_bfloat16* b, int64_t ldb,
               float beta, float* c, int64_t ldc) {
  const float alpha = 1.f;
  CUBLAS_CHECK(cublasGemmEx(cublas_handle(device), ta, tb, i32(m), i32(n), i32(k), &alpha, a,
                            CUDA_R_16BF, i32(lda), b, CUDA_R_16BF, i32(ldb), &beta, c, CUDA_R_32F,
                            i32(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void linear_forward_bf16(int device, const float* x, const float* w, const float* b, float* y,
                         const LinearShape& s) {
  detail::check_linear(s, "cuda::linear_forward_bf16");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  if (cuda_kernels() == CudaKernels::Engine) {  // the bias in cuBLASLt's epilogue
    Bf16Copy xb(device, x, s.n * s.in), wb(device, w, s.out * s.in);
    return detail::engine_linear_forward(device, xb.get(), wb.get(), b, y, s, true);
  }
  if (b) detail::broadcast_rows(device, b, y, s.n, s.out);
  Bf16Copy xb(device, x, s.n * s.in), wb(device, w, s.out * s.in);
  // y^T (out, N) = w x^T (+ the bias rows already in y)
  gemm_bf16(device, CUBLAS_OP_T, CUBLAS_OP_N, s.out, s.n, s.in, wb.get(), s.in, xb.get(), s.in,
            b ? 1.f : 0.f, y, s.out);
}

void linear_backward_data_bf16(int device, const float* dy, const float* w, float* dx,
                               const LinearShape& s) {
  detail::check_linear(s, "cuda::linear_backward_data_bf16");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  Bf16Copy dyb(device, dy, s.n * s.out), wb(device, w, s.out * s.in);
  // dx^T (in, N) = w^T dy^T
  gemm_bf16(device, CUBLAS_OP_N, CUBLAS_OP_N, s.in, s.n, s.out, wb.get(), s.in, dyb.get(), s.out,
            0.f, dx, s.in);
}

void linear_backward_weight_bf16(int device, const float* dy, const float* x, float* dw,
                                 const LinearShape& s, float beta) {
  detail::check_linear(s, "cuda::linear_backward_weight_bf16");
  ::engine::cuda::DeviceGuard guard(device);
  if (cuda_kernels() == CudaKernels::Engine)  // rounds as it loads: no bf16 copies
    return detail::engine_linear_wgrad(device, dy, x, dw, s, beta, true);
  if (s.n == 0) return detail::scale_or_zero(device, dw, s.out * s.in, beta);
  Bf16Copy dyb(device, dy, s.n * s.out), xb(device, x, s.n * s.in);
  // dw^T (in, out) = x^T dy
  gemm_bf16(device, CUBLAS_OP_N, CUBLAS_OP_T, s.in, s.out, s.n, xb.get(), s.in, dyb.get(), s.out,
            beta, dw, s.in);
}

void conv2d_forward_bf16(int device, const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s) {
  ::engine::cuda::DeviceGuard guard(device);
  if (cuda_kernels() == CudaKernels::Engine)  // tensor cores (conv_bf16.cu)
    return detail::engine_conv2d_forward_bf16(device, x, w, b, y, s);
  RoundedCopy xr(device, x, s.x_count()), wr(device, w, s.w_count());
  conv2d_forward(device, xr.get(), wr.get(), b, y, s);
}

void conv2d_backward_input_bf16(int device, const float* dy, const float* w, float* dx,
                                const Conv2dShape& s) {
  ::engine::cuda::DeviceGuard guard(device);
  if (cuda_kernels() == CudaKernels::Engine)  // tensor cores (conv_bf16.cu)
    return detail::engine_conv2d_backward_input_bf16(device, dy, w, dx, s);
  RoundedCopy dyr(device, dy, s.y_count()), wr(device, w, s.w_count());
  conv2d_backward_input(device, dyr.get(), wr.get(), dx, s);
}

void conv2d_backward_weight_bf16(int device, const float* x, const float* dy, float* dw, float* db,
                                 const Conv2dShape& s, float beta) {
  ::engine::cuda::DeviceGuard guard(device);
  if (db) conv2d_backward_bias(device, dy, db, s, beta);  // fp32 sum of the unrounded dy
  if (cuda_kernels() == CudaKernels::Engine)              // rounds as it loads: no rounded copies
    return detail::engine_conv2d_wgrad(device, x, dy, dw, nullptr, s, beta, true);
  RoundedCopy xr(device, x, s.x_count()), dyr(device, dy, s.y_count());
  conv2d_backward_weight(device, xr.get(), dyr.get(), dw, nullptr, s, beta);
}

}  // namespace engine::kernels::cuda
