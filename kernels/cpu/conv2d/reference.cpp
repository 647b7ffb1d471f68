// kernels/cpu/conv2d/reference.cpp: the convolution's definition as plain loops accumulating in
// double: forward, input, weight and bias gradients. Start reading conv2d here.
#include "kernels/cpu/conv2d/reference.h"

namespace engine::kernels::ref {

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s) {
  const int64_t oh = s.oh(), ow = s.ow();
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t co = 0; co < s.c_out; ++co)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b ? b[co] : 0.0;
          for (int64_t ci = 0; ci < s.c_in; ++ci)
            for (int64_t kh = 0; kh < s.kh; ++kh)
              for (int64_t kw = 0; kw < s.kw; ++kw) {
                int64_t ih = i * s.stride - s.pad + kh, iw = j * s.stride - s.pad + kw;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                acc += double(x[((n * s.c_in + ci) * s.h + ih) * s.w + iw]) *
                       w[((co * s.c_in + ci) * s.kh + kh) * s.kw + kw];
              }
          y[((n * s.c_out + co) * oh + i) * ow + j] = static_cast<float>(acc);
        }
}

void conv2d_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s) {
  const int64_t oh = s.oh(), ow = s.ow();
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t ci = 0; ci < s.c_in; ++ci)
      for (int64_t ih = 0; ih < s.h; ++ih)
        for (int64_t iw = 0; iw < s.w; ++iw) {
          double acc = 0.0;
          for (int64_t co = 0; co < s.c_out; ++co)
            for (int64_t kh = 0; kh < s.kh; ++kh)
              for (int64_t kw = 0; kw < s.kw; ++kw) {
                int64_t ti = ih + s.pad - kh, tj = iw + s.pad - kw;  // = i*stride, j*stride
                if (ti < 0 || tj < 0 || ti % s.stride || tj % s.stride) continue;
                int64_t i = ti / s.stride, j = tj / s.stride;
                if (i >= oh || j >= ow) continue;
                acc += double(dy[((n * s.c_out + co) * oh + i) * ow + j]) *
                       w[((co * s.c_in + ci) * s.kh + kh) * s.kw + kw];
              }
          dx[((n * s.c_in + ci) * s.h + ih) * s.w + iw] = static_cast<float>(acc);
        }
}

void conv2d_backward_weight(const float* x, const float* dy, float* dw, const Conv2dShape& s) {
  const int64_t oh = s.oh(), ow = s.ow();
  for (int64_t co = 0; co < s.c_out; ++co)
    for (int64_t ci = 0; ci < s.c_in; ++ci)
      for (int64_t kh = 0; kh < s.kh; ++kh)
        for (int64_t kw = 0; kw < s.kw; ++kw) {
          double acc = 0.0;
          for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < oh; ++i)
              for (int64_t j = 0; j < ow; ++j) {
                int64_t ih = i * s.stride - s.pad + kh, iw = j * s.stride - s.pad + kw;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                acc += double(x[((n * s.c_in + ci) * s.h + ih) * s.w + iw]) *
                       dy[((n * s.c_out + co) * oh + i) * ow + j];
              }
          dw[((co * s.c_in + ci) * s.kh + kh) * s.kw + kw] = static_cast<float>(acc);
        }
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s) {
  const int64_t p = s.oh() * s.ow();
  for (int64_t co = 0; co < s.c_out; ++co) {
    double acc = 0.0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t i = 0; i < p; ++i) acc += dy[(n * s.c_out + co) * p + i];
    db[co] = static_cast<float>(acc);
  }
}

}  // namespace engine::kernels::ref
