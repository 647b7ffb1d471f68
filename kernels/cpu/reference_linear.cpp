// kernels/cpu/reference_linear.cpp: reference implementations for checks: the linear layer,
// plain loops accumulating in double.
#include "kernels/cpu/reference.h"

namespace engine::kernels::ref {

void linear_forward(const float* x, const float* w, const float* b, float* y,
                    const LinearShape& s) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.out; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int64_t i = 0; i < s.in; ++i) acc += double(x[n * s.in + i]) * w[o * s.in + i];
      y[n * s.out + o] = static_cast<float>(acc);
    }
}

void linear_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                     float* db, const LinearShape& s) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t i = 0; i < s.in; ++i) {
      double acc = 0.0;
      for (int64_t o = 0; o < s.out; ++o) acc += double(dy[n * s.out + o]) * w[o * s.in + i];
      dx[n * s.in + i] = static_cast<float>(acc);
    }
  for (int64_t o = 0; o < s.out; ++o) {
    for (int64_t i = 0; i < s.in; ++i) {
      double acc = 0.0;
      for (int64_t n = 0; n < s.n; ++n) acc += double(dy[n * s.out + o]) * x[n * s.in + i];
      dw[o * s.in + i] = static_cast<float>(acc);
    }
    double acc = 0.0;
    for (int64_t n = 0; n < s.n; ++n) acc += dy[n * s.out + o];
    db[o] = static_cast<float>(acc);
  }
}

}  // namespace engine::kernels::ref
