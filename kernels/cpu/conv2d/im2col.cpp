// kernels/cpu/conv2d/im2col.cpp: the im2col + sgemm path of conv2d (any stride and padding):
// each sample's input patches unrolled into a column matrix, then one OpenBLAS sgemm per sample.
#include "kernels/cpu/conv2d/im2col.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"

namespace engine::kernels::cpu::detail {
namespace {

// col (K, OH*OW) of one sample x (Cin, H, W): col[(ci, kh, kw)][(oh, ow)] = x at
// (oh*stride - pad + kh, ow*stride - pad + kw), zero outside.
void im2col(const float* x, const Conv2dShape& s, float* col) {
  const int64_t oh = s.oh(), ow = s.ow(), khw = s.kh * s.kw;
  parallel_for(s.k(), 4, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t ci = k / khw, kh = (k % khw) / s.kw, kw = k % s.kw;
      const float* plane = x + ci * s.h * s.w;
      float* dst = col + k * oh * ow;
      for (int64_t r = 0; r < oh; ++r) {
        const int64_t ih = r * s.stride - s.pad + kh;
        for (int64_t c = 0; c < ow; ++c) {
          const int64_t iw = c * s.stride - s.pad + kw;
          bool in = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
          dst[r * ow + c] = in ? plane[ih * s.w + iw] : 0.f;
        }
      }
    }
  });
}

// dx (Cin, H, W) = sum of col (K, OH*OW) scattered back; one input channel per task.
void col2im(const float* col, const Conv2dShape& s, float* dx) {
  const int64_t oh = s.oh(), ow = s.ow(), khw = s.kh * s.kw;
  parallel_for(s.c_in, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ci = c0; ci < c1; ++ci) {
      float* plane = dx + ci * s.h * s.w;
      std::memset(plane, 0, sizeof(float) * s.h * s.w);
      for (int64_t r = 0; r < khw; ++r) {
        const int64_t kh = r / s.kw, kw = r % s.kw;
        const float* src = col + (ci * khw + r) * oh * ow;
        for (int64_t i = 0; i < oh; ++i) {
          const int64_t ih = i * s.stride - s.pad + kh;
          if (ih < 0 || ih >= s.h) continue;
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t iw = j * s.stride - s.pad + kw;
            if (iw >= 0 && iw < s.w) plane[ih * s.w + iw] += src[i * ow + j];
          }
        }
      }
    }
  });
}

}  // namespace

int64_t im2col_workspace_count(const Conv2dShape& s) {
  return s.k() * s.oh() * s.ow();
}

void im2col_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
                    float* ws) {
  const int64_t p = s.oh() * s.ow(), k = s.k();
  for (int64_t n = 0; n < s.n; ++n) {
    float* yn = y + n * s.c_out * p;
    if (b)
      for (int64_t co = 0; co < s.c_out; ++co) std::fill(yn + co * p, yn + (co + 1) * p, b[co]);
    im2col(x + n * s.c_in * s.h * s.w, s, ws);
    // yn (Cout, P) = w (Cout, K) col (K, P) [+ yn]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.c_out, p, k, 1.f, w, k, ws, p,
                b ? 1.f : 0.f, yn, p);
  }
}

void im2col_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                           float* ws) {
  const int64_t p = s.oh() * s.ow(), k = s.k();
  for (int64_t n = 0; n < s.n; ++n) {
    // dcol (K, P) = w^T (K, Cout) dy[n] (Cout, P)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, p, s.c_out, 1.f, w, k,
                dy + n * s.c_out * p, p, 0.f, ws, p);
    col2im(ws, s, dx + n * s.c_in * s.h * s.w);
  }
}

void im2col_backward_weight(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            float beta, float* ws) {
  const int64_t p = s.oh() * s.ow(), k = s.k();
  if (s.n == 0) {
    for (int64_t i = 0; i < s.w_count(); ++i) dw[i] = beta == 0.f ? 0.f : beta * dw[i];
    return;
  }
  for (int64_t n = 0; n < s.n; ++n) {
    im2col(x + n * s.c_in * s.h * s.w, s, ws);
    // dw (Cout, K) = dy[n] (Cout, P) col^T (P, K) + beta' dw
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.c_out, k, p, 1.f, dy + n * s.c_out * p,
                p, ws, p, n == 0 ? beta : 1.f, dw, k);
  }
}

}  // namespace engine::kernels::cpu::detail
