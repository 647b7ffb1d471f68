// kernels/cpu/reference_bf16.h: the bf16 layers by rounding, the reference the vdpbf16ps kernels
// (bf16_ops.h) are checked against: each operand is rounded to bf16 (round_to_bf16) into an fp32
// buffer and the fp32 kernels multiply the rounded values (every product of two bf16 values is
// exact in fp32, so this is bf16 multiplication with fp32 accumulation). Shapes and contracts are
// those of bf16_ops.h; these run on any CPU. The convolution's are declared in
// kernels/cpu/conv2d/reference.h (conv2d/reference_bf16.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/allocator.h"
#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/conv2d/reference.h"
#include "kernels/linear.h"

namespace engine::kernels::ref {

void linear_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const LinearShape& s);
void linear_backward_data_bf16(const float* dy, const float* w, float* dx, const LinearShape& s);
void linear_backward_weight_bf16(const float* dy, const float* x, float* dw, const LinearShape& s,
                                 float beta);

namespace detail {

// A rounded copy of src in a block of the CPU allocator's cache, freed on scope exit.
class Rounded {
 public:
  Rounded(const float* src, int64_t count)
      : n_(static_cast<size_t>(count > 0 ? count : 1) * sizeof(float)),
        p_(static_cast<float*>(cpu_allocator::alloc(n_))) {
    cpu::round_to_bf16(src, p_, count);
  }
  ~Rounded() { cpu_allocator::free(p_, n_); }
  Rounded(const Rounded&) = delete;
  Rounded& operator=(const Rounded&) = delete;
  const float* get() const { return p_; }

 private:
  size_t n_;
  float* p_;
};

}  // namespace detail
}  // namespace engine::kernels::ref
