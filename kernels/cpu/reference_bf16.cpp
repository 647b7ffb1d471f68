// kernels/cpu/reference_bf16.cpp: the bf16 layers by rounding (see reference_bf16.h).
#include "kernels/cpu/reference_bf16.h"

#include "core/allocator.h"
#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/linear.h"

namespace engine::kernels::cpu {
namespace {

// A rounded copy of src in a block of the CPU allocator's cache, freed on scope exit.
class Rounded {
 public:
  Rounded(const float* src, int64_t count)
      : n_(static_cast<size_t>(count > 0 ? count : 1) * sizeof(float)),
        p_(static_cast<float*>(cpu_allocator::alloc(n_))) {
    round_to_bf16(src, p_, count);
  }
  ~Rounded() { cpu_allocator::free(p_, n_); }
  Rounded(const Rounded&) = delete;
  Rounded& operator=(const Rounded&) = delete;
  const float* get() const { return p_; }

 private:
  size_t n_;
  float* p_;
};

}  // namespace

void linear_forward_bf16_reference(const float* x, const float* w, const float* b, float* y,
                                   const LinearShape& s) {
  Rounded xr(x, s.n * s.in), wr(w, s.out * s.in);
  linear_forward(xr.get(), wr.get(), b, y, s);
}

void linear_backward_data_bf16_reference(const float* dy, const float* w, float* dx,
                                         const LinearShape& s) {
  Rounded dyr(dy, s.n * s.out), wr(w, s.out * s.in);
  linear_backward_data(dyr.get(), wr.get(), dx, s);
}

void linear_backward_weight_bf16_reference(const float* dy, const float* x, float* dw,
                                           const LinearShape& s, float beta) {
  Rounded dyr(dy, s.n * s.out), xr(x, s.n * s.in);
  linear_backward_weight(dyr.get(), xr.get(), dw, s, beta);
}

void conv2d_forward_bf16_reference(const float* x, const float* w, const float* b, float* y,
                                   const Conv2dShape& s) {
  Rounded xr(x, s.x_count()), wr(w, s.w_count());
  conv2d_forward(xr.get(), wr.get(), b, y, s);
}

void conv2d_backward_data_bf16_reference(const float* dy, const float* w, float* dx,
                                         const Conv2dShape& s) {
  Rounded dyr(dy, s.y_count()), wr(w, s.w_count());
  conv2d_backward_data(dyr.get(), wr.get(), dx, s);
}

void conv2d_backward_filter_bf16_reference(const float* x, const float* dy, float* dw, float* db,
                                           const Conv2dShape& s, float beta) {
  if (db) conv2d_backward_bias(dy, db, s, beta);  // fp32 sum of the unrounded dy
  Rounded xr(x, s.x_count()), dyr(dy, s.y_count());
  conv2d_backward_filter(xr.get(), dyr.get(), dw, nullptr, s, beta);
}

}  // namespace engine::kernels::cpu
