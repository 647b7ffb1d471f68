// kernels/cpu/reference_bf16.cpp: the bf16 linear layer by rounding (see reference_bf16.h).
#include "kernels/cpu/reference_bf16.h"

#include "kernels/cpu/linear.h"

namespace engine::kernels::ref {

using detail::Rounded;

void linear_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const LinearShape& s) {
  Rounded xr(x, s.n * s.in), wr(w, s.out * s.in);
  cpu::linear_forward(xr.get(), wr.get(), b, y, s);
}

void linear_backward_data_bf16(const float* dy, const float* w, float* dx, const LinearShape& s) {
  Rounded dyr(dy, s.n * s.out), wr(w, s.out * s.in);
  cpu::linear_backward_data(dyr.get(), wr.get(), dx, s);
}

void linear_backward_weight_bf16(const float* dy, const float* x, float* dw, const LinearShape& s,
                                 float beta) {
  Rounded dyr(dy, s.n * s.out), xr(x, s.n * s.in);
  cpu::linear_backward_weight(dyr.get(), xr.get(), dw, s, beta);
}

}  // namespace engine::kernels::ref
