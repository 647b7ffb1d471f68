// kernels/cpu/conv2d.cpp: conv2d dispatch, the im2col + sgemm path (any stride and padding) and
// the bias gradient. The direct stride-1 path lives in conv2d_direct.cpp.
#include "kernels/cpu/conv2d.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "core/allocator.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/conv2d_direct.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/reduce.h"

namespace engine::kernels::cpu {
namespace {

void check_shape(const Conv2dShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.c_in > 0 && s.c_out > 0 && s.kh > 0 && s.kw > 0 && s.stride > 0 &&
                   s.pad >= 0 && s.oh() > 0 && s.ow() > 0,
               what, ": bad shape x (", s.n, ", ", s.c_in, ", ", s.h, ", ", s.w, ") w (", s.c_out,
               ", ", s.c_in, ", ", s.kh, ", ", s.kw, ") stride ", s.stride, " pad ", s.pad);
}

bool use_direct(const Conv2dShape& s, ConvAlgo algo, const char* what) {
  if (algo == ConvAlgo::Im2col) return false;
  bool ok = detail::direct_supported(s);
  ENGINE_CHECK(ok || algo == ConvAlgo::Auto, what,
               ": direct kernels need AVX-512, stride 1 and pad <= k-1");
  return ok;
}

void check_ws(int64_t need, int64_t have, const char* what) {
  ENGINE_CHECK(have >= need, what, ": workspace of ", have, " floats, ", need, " needed at ",
               num_threads(), " threads (query conv2d_workspace_count)");
}

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

// Auto's workspace for s, from the CPU allocator's size-class cache (no fresh page faults in a
// training step), returned when the pass ends.
class Workspace {
 public:
  explicit Workspace(const Conv2dShape& s)
      : count_(conv2d_workspace_count(s)),
        bytes_(static_cast<size_t>(std::max<int64_t>(count_, 1)) * sizeof(float)),
        p_(static_cast<float*>(cpu_allocator::alloc(bytes_))) {}
  ~Workspace() { cpu_allocator::free(p_, bytes_); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  float* get() const { return p_; }
  int64_t count() const { return count_; }

 private:
  int64_t count_;
  size_t bytes_;
  float* p_;
};

int64_t im2col_ws(const Conv2dShape& s) {
  return s.k() * s.oh() * s.ow();
}

}  // namespace

bool conv2d_algo_supported(const Conv2dShape& s, ConvAlgo algo, ConvPass pass) {
  if (algo == ConvAlgo::Auto || algo == ConvAlgo::Im2col) return true;
  if (!detail::direct_supported(s)) return false;
  return algo != ConvAlgo::ChannelVector || pass != ConvPass::BackwardFilter ||
         detail::direct_cv_filter_supported(s);
}

int64_t conv2d_workspace_count(const Conv2dShape& s, ConvAlgo algo) {
  check_shape(s, "conv2d_workspace_count");
  if (!use_direct(s, algo, "conv2d_workspace_count")) return im2col_ws(s);
  const int nt = num_threads();
  int64_t filter = 0;
  if (algo != ConvAlgo::ChannelVector || detail::direct_cv_filter_supported(s))
    filter = detail::direct_backward_filter_ws(s, algo, nt);
  return std::max({detail::direct_forward_ws(s, algo, nt),
                   detail::direct_backward_data_ws(s, algo, nt), filter});
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
                    float* ws, int64_t ws_count, ConvAlgo algo) {
  check_shape(s, "conv2d_forward");
  if (use_direct(s, algo, "conv2d_forward")) {
    check_ws(detail::direct_forward_ws(s, algo, num_threads()), ws_count, "conv2d_forward");
    detail::direct_forward(x, w, b, y, s, algo, ws);
    return;
  }
  check_ws(im2col_ws(s), ws_count, "conv2d_forward");
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

bool conv2d_pool_supported(const Conv2dShape& s) {
  return has_avx512f() && detail::direct_pool_supported(s);
}

void conv2d_pool_forward(const float* x, const float* w, const float* b, float* y, int32_t* arg,
                         const Conv2dShape& s, const Pool2dShape& ps, bool relu) {
  check_shape(s, "conv2d_pool_forward");
  ENGINE_CHECK(conv2d_pool_supported(s), "conv2d_pool_forward: needs one input channel, stride 1, ",
               "pad <= k-1 and AVX-512");
  ENGINE_CHECK(ps.n == s.n && ps.c == s.c_out && ps.h == s.oh() && ps.w == s.ow(),
               "conv2d_pool_forward: pool shape (", ps.n, ", ", ps.c, ", ", ps.h, ", ", ps.w,
               ") is not the convolution's output (", s.n, ", ", s.c_out, ", ", s.oh(), ", ",
               s.ow(), ")");
  ENGINE_CHECK(ps.k > 0 && ps.stride > 0 && ps.h >= ps.k && ps.w >= ps.k,
               "conv2d_pool_forward: window ", ps.k, " (stride ", ps.stride,
               ") does not fit the convolution's output (", ps.h, ", ", ps.w, ")");
  if (s.n == 0) return;
  detail::direct_forward_pool(x, w, b, y, arg, s, ps, relu);
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          float* ws, int64_t ws_count, ConvAlgo algo) {
  check_shape(s, "conv2d_backward_data");
  if (use_direct(s, algo, "conv2d_backward_data")) {
    check_ws(detail::direct_backward_data_ws(s, algo, num_threads()), ws_count,
             "conv2d_backward_data");
    detail::direct_backward_data(dy, w, dx, s, algo, ws);
    return;
  }
  check_ws(im2col_ws(s), ws_count, "conv2d_backward_data");
  const int64_t p = s.oh() * s.ow(), k = s.k();
  for (int64_t n = 0; n < s.n; ++n) {
    // dcol (K, P) = w^T (K, Cout) dy[n] (Cout, P)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, p, s.c_out, 1.f, w, k,
                dy + n * s.c_out * p, p, 0.f, ws, p);
    col2im(ws, s, dx + n * s.c_in * s.h * s.w);
  }
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta, float* ws, int64_t ws_count,
                            ConvAlgo algo) {
  check_shape(s, "conv2d_backward_filter");
  if (use_direct(s, algo, "conv2d_backward_filter")) {
    check_ws(detail::direct_backward_filter_ws(s, algo, num_threads()), ws_count,
             "conv2d_backward_filter");
    detail::direct_backward_filter(x, dy, dw, db, s, beta, algo, ws);
    return;
  }
  if (db) conv2d_backward_bias(dy, db, s, beta);
  check_ws(im2col_ws(s), ws_count, "conv2d_backward_filter");
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

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s) {
  Workspace ws(s);
  conv2d_forward(x, w, b, y, s, ws.get(), ws.count());
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s) {
  Workspace ws(s);
  conv2d_backward_data(dy, w, dx, s, ws.get(), ws.count());
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta) {
  Workspace ws(s);
  conv2d_backward_filter(x, dy, dw, db, s, beta, ws.get(), ws.count());
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, float beta) {
  const int64_t p = s.oh() * s.ow();
  parallel_for(s.c_out, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t co = c0; co < c1; ++co) {
      double acc = 0.0;
      for (int64_t n = 0; n < s.n; ++n) acc += sum_block(dy + (n * s.c_out + co) * p, p);
      db[co] = beta == 0.f ? static_cast<float>(acc) : beta * db[co] + static_cast<float>(acc);
    }
  });
}

}  // namespace engine::kernels::cpu
