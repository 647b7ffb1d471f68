// kernels/cpu/conv2d/reference_bf16.cpp: the bf16 convolution by rounding (reference.h): rounded
// copies of the operands through the fp32 kernels of conv2d.h.
#include "kernels/cpu/reference_bf16.h"

#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/conv2d/reference.h"

namespace engine::kernels::ref {

using detail::Rounded;

void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s) {
  Rounded xr(x, s.x_count()), wr(w, s.w_count());
  cpu::conv2d_forward(xr.get(), wr.get(), b, y, s);
}

void conv2d_backward_input_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s) {
  Rounded dyr(dy, s.y_count()), wr(w, s.w_count());
  cpu::conv2d_backward_input(dyr.get(), wr.get(), dx, s);
}

void conv2d_backward_weight_bf16(const float* x, const float* dy, float* dw, float* db,
                                 const Conv2dShape& s, float beta) {
  if (db) cpu::conv2d_backward_bias(dy, db, s, beta);  // fp32 sum of the unrounded dy
  Rounded xr(x, s.x_count()), dyr(dy, s.y_count());
  cpu::conv2d_backward_weight(xr.get(), dyr.get(), dw, nullptr, s, beta);
}

}  // namespace engine::kernels::ref
