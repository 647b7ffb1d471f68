// kernels/cuda/internal.cuh: helpers shared by the kernels/cuda/*.cu files (not for callers).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/cuda_backend.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"

namespace engine::kernels::cuda::detail {

// nbytes of the caching allocator on `device` for one call's scope (work is queued on the compute
// stream, so the next user of the block runs after it); nbytes 0 holds nothing.
class DeviceBlock {
 public:
  DeviceBlock(int device, size_t nbytes)
      : device_(device),
        nbytes_(nbytes),
        p_(nbytes ? ::engine::cuda::alloc(device, nbytes) : nullptr) {}
  ~DeviceBlock() {
    if (p_) ::engine::cuda::free(device_, p_, nbytes_);
  }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  void* get() const { return p_; }
  size_t nbytes() const { return nbytes_; }

 private:
  int device_;
  size_t nbytes_;
  void* p_;
};

// A linear layer's shape, checked for cuBLAS (dimensions under 2^31); `what` names the caller.
void check_linear(const LinearShape& s, const char* what);

// y[i, j] = b[j] for y (rows, cols): the bias rows a GEMM with beta 1 then adds to.
void broadcast_rows(int device, const float* b, float* y, int64_t rows, int64_t cols);

// out (C) = beta * out + sum over N, HW of x (N, C, HW), one block per channel, fixed order.
void channel_sum(int device, const float* x, float* out, int64_t n, int64_t c, int64_t hw,
                 float beta);

// dst = beta * dst, as a GEMM with an empty sum leaves it: beta 0 writes zeros (the CPU's
// answer), where multiplying by 0 would keep NaN and Inf left in a fresh block.
void scale_or_zero(int device, float* dst, int64_t count, float beta);

// CudaKernels::Engine (kernels/cuda/wgrad.cu): dw = beta * dw + the weight gradient, and db
// likewise when not null, in a fixed order of sums; round_bf16: operands rounded to bf16 first.
void engine_conv2d_wgrad(int device, const float* x, const float* dy, float* dw, float* db,
                         const Conv2dShape& s, float beta, bool round_bf16);
void engine_linear_wgrad(int device, const float* dy, const float* x, float* dw,
                         const LinearShape& s, float beta, bool round_bf16);

// bf16 precision under CudaKernels::Engine (kernels/cuda/conv_bf16.cu): im2col + bf16 GemmEx
// on tensor cores, fp32 sums and results; the input gradient gathered back (col2im), no atomics.
void engine_conv2d_forward_bf16(int device, const float* x, const float* w, const float* b,
                                float* y, const Conv2dShape& s);
void engine_conv2d_backward_input_bf16(int device, const float* dy, const float* w, float* dx,
                                       const Conv2dShape& s);

// CudaKernels::Engine (kernels/cuda/linear_lt.cu): y (N, out) = x w^T + b on cuBLASLt, the
// bias added by the GEMM's epilogue; b may be null; x and w fp32, or bf16 when bf16 (y fp32
// either way). One algorithm per shape, no in-place split-K: deterministic.
void engine_linear_forward(int device, const void* x, const void* w, const float* b, float* y,
                           const LinearShape& s, bool bf16);

}  // namespace engine::kernels::cuda::detail
