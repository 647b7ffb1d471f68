// kernels/cuda/internal.cuh: helpers shared by the kernels/cuda/*.cu files (not for callers).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/cuda_backend.h"
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

}  // namespace engine::kernels::cuda::detail
