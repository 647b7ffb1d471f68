// kernels/cpu/conv2d/conv2d.cpp: conv2d.h's entry points: shape and workspace checks, the choice
// between the im2col + sgemm path (im2col.cpp) and the direct stride-1 kernels (direct.cpp), and
// the bias gradient.
#include "kernels/cpu/conv2d/conv2d.h"

#include <algorithm>

#include "core/allocator.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/conv2d/direct.h"
#include "kernels/cpu/conv2d/im2col.h"
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

}  // namespace

bool conv2d_algo_supported(const Conv2dShape& s, ConvAlgo algo, ConvPass pass) {
  if (algo == ConvAlgo::Auto || algo == ConvAlgo::Im2col) return true;
  if (!detail::direct_supported(s)) return false;
  return algo != ConvAlgo::ChannelVector || pass != ConvPass::BackwardWeight ||
         detail::direct_channel_vector_weight_supported(s);
}

int64_t conv2d_workspace_count(const Conv2dShape& s, ConvAlgo algo) {
  check_shape(s, "conv2d_workspace_count");
  if (!use_direct(s, algo, "conv2d_workspace_count")) return detail::im2col_workspace_count(s);
  const int nt = num_threads();
  int64_t filter = 0;
  if (algo != ConvAlgo::ChannelVector || detail::direct_channel_vector_weight_supported(s))
    filter = detail::direct_backward_weight_ws(s, algo, nt);
  return std::max({detail::direct_forward_ws(s, algo, nt),
                   detail::direct_backward_input_ws(s, algo, nt), filter});
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
                    float* ws, int64_t ws_count, ConvAlgo algo) {
  check_shape(s, "conv2d_forward");
  if (use_direct(s, algo, "conv2d_forward")) {
    check_ws(detail::direct_forward_ws(s, algo, num_threads()), ws_count, "conv2d_forward");
    detail::direct_forward(x, w, b, y, s, algo, ws);
    return;
  }
  check_ws(detail::im2col_workspace_count(s), ws_count, "conv2d_forward");
  detail::im2col_forward(x, w, b, y, s, ws);
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

void conv2d_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                           float* ws, int64_t ws_count, ConvAlgo algo) {
  check_shape(s, "conv2d_backward_input");
  if (use_direct(s, algo, "conv2d_backward_input")) {
    check_ws(detail::direct_backward_input_ws(s, algo, num_threads()), ws_count,
             "conv2d_backward_input");
    detail::direct_backward_input(dy, w, dx, s, algo, ws);
    return;
  }
  check_ws(detail::im2col_workspace_count(s), ws_count, "conv2d_backward_input");
  detail::im2col_backward_input(dy, w, dx, s, ws);
}

void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta, float* ws, int64_t ws_count,
                            ConvAlgo algo) {
  check_shape(s, "conv2d_backward_weight");
  if (use_direct(s, algo, "conv2d_backward_weight")) {
    check_ws(detail::direct_backward_weight_ws(s, algo, num_threads()), ws_count,
             "conv2d_backward_weight");
    detail::direct_backward_weight(x, dy, dw, db, s, beta, algo, ws);
    return;
  }
  if (db) conv2d_backward_bias(dy, db, s, beta);
  check_ws(detail::im2col_workspace_count(s), ws_count, "conv2d_backward_weight");
  detail::im2col_backward_weight(x, dy, dw, s, beta, ws);
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s) {
  Workspace ws(s);
  conv2d_forward(x, w, b, y, s, ws.get(), ws.count());
}

void conv2d_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s) {
  Workspace ws(s);
  conv2d_backward_input(dy, w, dx, s, ws.get(), ws.count());
}

void conv2d_backward_weight(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta) {
  Workspace ws(s);
  conv2d_backward_weight(x, dy, dw, db, s, beta, ws.get(), ws.count());
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
