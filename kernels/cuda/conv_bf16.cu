// kernels/cuda/conv_bf16.cu: conv2d's forward and input gradient under bf16 precision and
// CudaKernels::Engine, on tensor cores with the CPU's semantics (bf16 operands, fp32 sums, fp32
// results): im2col in bf16, then one cuBLAS GemmEx per sample (strided batched, CUDA_R_16BF
// operands, fp32 output, CUBLAS_COMPUTE_32F), where cuDNN's legacy API would take bf16 inputs
// only with a bf16 output. Per sample n, row-major, with K = c_in*kh*kw and P = oh*ow:
//   forward     y_n (c_out, P) = w (c_out, K) col_n (K, P) + b
//               column-major: y_n^T (P, c_out) = col_n^T (P, K) w^T (K, c_out) : gemm(N, N)
//   input grad  dcol_n (K, P) = w^T (K, c_out) dy_n (c_out, P), then dx = col2im(dcol), a gather
//               column-major: dcol_n^T (P, K) = dy_n^T (P, c_out) w (c_out, K)    : gemm(N, T)
// The column index maps are kernels/cuda/wgrad_plan.h's (tested on the CPU). No atomics.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "core/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/internal.cuh"
#include "kernels/cuda/wgrad_plan.h"

namespace engine::kernels::cuda {
namespace {

// col (n, k, p) = bf16(x under weight j at position p of sample n); count = n*k*p < 2^31.
__global__ void im2col_bf16_kernel(const float* x, __nv_bfloat16* col, WgradGeom g, int32_t count) {
  const int32_t step = static_cast<int32_t>(gridDim.x * blockDim.x);
  for (int32_t e = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); e < count;
       e += step) {
    const int32_t p = e % g.p, t = e / g.p, j = t % g.k, n = t / g.k;
    col[e] = __float2bfloat16_rn(wgrad_x_at(x, g, j, n * g.p + p));
  }
}

__global__ void to_bf16_kernel(const float* src, __nv_bfloat16* dst, int32_t count) {
  const int32_t step = static_cast<int32_t>(gridDim.x * blockDim.x);
  for (int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); i < count;
       i += step)
    dst[i] = __float2bfloat16_rn(src[i]);
}

// y (n, m, p) = b[m]: what the forward GEMM adds to (beta 1).
__global__ void bias_planes_kernel(const float* b, float* y, WgradGeom g, int32_t count) {
  const int32_t step = static_cast<int32_t>(gridDim.x * blockDim.x);
  for (int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); i < count;
       i += step)
    y[i] = b[(i / g.p) % g.m];
}

__global__ void col2im_kernel(const float* dcol, float* dx, WgradGeom g, int32_t count) {
  const int32_t step = static_cast<int32_t>(gridDim.x * blockDim.x);
  for (int32_t e = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); e < count;
       e += step)
    dx[e] = col2im_at(dcol, g, e);
}

// Element counts under 2^30 (a grid stride added stays under 2^31).
WgradGeom checked_geom(const Conv2dShape& s, const char* what) {
  const WgradGeom g = wgrad_geom(s);
  const int64_t cols = s.n * s.k() * s.oh() * s.ow();
  ENGINE_CHECK(cols < (int64_t{1} << 30) && s.x_count() < (int64_t{1} << 30) &&
                   s.y_count() < (int64_t{1} << 30),
               what, ": over 2^30 elements for the engine's bf16 convolution");
  return g;
}

__nv_bfloat16* bf16_ptr(const detail::DeviceBlock& b) {
  return static_cast<__nv_bfloat16*>(b.get());
}

}  // namespace

namespace detail {

void engine_conv2d_forward_bf16(int device, const float* x, const float* w, const float* b,
                                float* y, const Conv2dShape& s) {
  const WgradGeom g = checked_geom(s, "cuda::conv2d_forward_bf16 (engine)");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  cudaStream_t stream = ::engine::cuda::compute_stream(device);
  const int32_t cols = g.q * g.k, weights = g.m * g.k, outs = g.q * g.m;
  DeviceBlock col(device, static_cast<size_t>(cols) * 2),
      wb(device, static_cast<size_t>(weights) * 2);
  im2col_bf16_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(x, bf16_ptr(col), g, cols);
  CUDA_CHECK_LAUNCH();
  to_bf16_kernel<<<blocks_for(weights), kThreads, 0, stream>>>(w, bf16_ptr(wb), weights);
  CUDA_CHECK_LAUNCH();
  if (b) {
    bias_planes_kernel<<<blocks_for(outs), kThreads, 0, stream>>>(b, y, g, outs);
    CUDA_CHECK_LAUNCH();
  }
  const float alpha = 1.f, beta = b ? 1.f : 0.f;
  const int batch = static_cast<int>(s.n);
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(device), CUBLAS_OP_N, CUBLAS_OP_N, g.p, g.m, g.k, &alpha, col.get(),
      CUDA_R_16BF, g.p, static_cast<int64_t>(g.k) * g.p, wb.get(), CUDA_R_16BF, g.k, 0, &beta, y,
      CUDA_R_32F, g.p, static_cast<int64_t>(g.m) * g.p, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

void engine_conv2d_backward_input_bf16(int device, const float* dy, const float* w, float* dx,
                                       const Conv2dShape& s) {
  const WgradGeom g = checked_geom(s, "cuda::conv2d_backward_input_bf16 (engine)");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  cudaStream_t stream = ::engine::cuda::compute_stream(device);
  const int32_t cols = g.q * g.k, weights = g.m * g.k, outs = g.q * g.m;
  const int32_t ins = static_cast<int32_t>(s.x_count());
  DeviceBlock dyb(device, static_cast<size_t>(outs) * 2),
      wb(device, static_cast<size_t>(weights) * 2);
  DeviceBlock dcol(device, static_cast<size_t>(cols) * sizeof(float));
  to_bf16_kernel<<<blocks_for(outs), kThreads, 0, stream>>>(dy, bf16_ptr(dyb), outs);
  CUDA_CHECK_LAUNCH();
  to_bf16_kernel<<<blocks_for(weights), kThreads, 0, stream>>>(w, bf16_ptr(wb), weights);
  CUDA_CHECK_LAUNCH();
  const float alpha = 1.f, beta = 0.f;
  const int batch = static_cast<int>(s.n);
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(device), CUBLAS_OP_N, CUBLAS_OP_T, g.p, g.k, g.m, &alpha, dyb.get(),
      CUDA_R_16BF, g.p, static_cast<int64_t>(g.m) * g.p, wb.get(), CUDA_R_16BF, g.k, 0, &beta,
      dcol.get(), CUDA_R_32F, g.p, static_cast<int64_t>(g.k) * g.p, batch, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  col2im_kernel<<<blocks_for(ins), kThreads, 0, stream>>>(static_cast<const float*>(dcol.get()), dx,
                                                          g, ins);
  CUDA_CHECK_LAUNCH();
}

}  // namespace detail
}  // namespace engine::kernels::cuda
