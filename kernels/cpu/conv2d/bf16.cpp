// kernels/cpu/conv2d/bf16.cpp: the bf16 convolution of bf16.h: which passes take the im2col-free
// GEMM (bf16_flat.cpp) and which the rounding reference (reference_bf16.cpp). All give the
// reference's values up to fp32 summation order.
#include "kernels/cpu/conv2d/bf16.h"

#include <algorithm>

#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/conv2d/bf16_flat.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/conv2d/reference.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/scratch.h"

namespace engine::kernels::cpu {
namespace {

// The conv passes that take the GEMM: stride 1 (forward and backward input: even channel counts,
// which excludes a first layer on one channel, whose K = KH KW is too short to gain anyway),
// products big enough to pay for the setup.
bool conv_big_enough(const Conv2dShape& s) {
  return static_cast<double>(s.y_count()) * s.k() >= detail::kBf16GemmMinMacs;
}
bool conv_on_gemm(const Conv2dShape& s) {
  return detail::conv2d_bf16_flat_supported(s) && conv_big_enough(s);
}
// Weight gradients of one input channel (K = KH KW rows) measured slower than the reference.
bool conv_weight_on_gemm(const Conv2dShape& s) {
  return detail::conv2d_bf16_flat_weight_supported(s) && s.c_in > 1 && conv_big_enough(s);
}

// The reference's weight gradient (fp32 kernel on rounded copies) by groups of samples whose
// copies stay in cache (~1 MiB), each group's gradient added on (the first with beta): for
// first layers (Cin 1), too short a K for the GEMM; db (unrounded dy) summed group by group.
// Measured ~2x faster than rounding all of dy first (a pass through memory).
void weight_by_rounded_groups(const float* x, const float* dy, float* dw, float* db,
                              const Conv2dShape& s, float beta) {
  const int64_t xs = s.c_in * s.h * s.w, ys = s.c_out * s.oh() * s.ow();
  const int64_t group = std::clamp<int64_t>((1 << 18) / (xs + ys), 1, std::max<int64_t>(s.n, 1));
  Scratch<float> xr(group * xs), dyr(group * ys);
  if (s.n == 0) {
    if (db) conv2d_backward_bias(dy, db, s, beta);
    return conv2d_backward_weight(x, dy, dw, nullptr, s, beta);
  }
  for (int64_t n0 = 0; n0 < s.n; n0 += group) {
    Conv2dShape g = s;
    g.n = std::min(group, s.n - n0);
    round_to_bf16(x + n0 * xs, xr.get(), g.n * xs);
    round_to_bf16(dy + n0 * ys, dyr.get(), g.n * ys);
    conv2d_backward_weight(xr.get(), dyr.get(), dw, nullptr, g, n0 == 0 ? beta : 1.f);
    if (db) conv2d_backward_bias(dy + n0 * ys, db, g, n0 == 0 ? beta : 1.f);  // dy still cached
  }
}

}  // namespace

void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  if (!conv_on_gemm(s)) return ref::conv2d_forward_bf16(x, w, b, y, s);
  detail::conv2d_forward_bf16_flat(x, w, b, y, s);
}

void conv2d_backward_input_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  if (!conv_on_gemm(s)) return ref::conv2d_backward_input_bf16(dy, w, dx, s);
  detail::conv2d_backward_input_bf16_flat(dy, w, dx, s);
}

void conv2d_forward_bf16_invariant(const float* x, const float* w, const float* b, float* y,
                                   const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  if (!detail::conv2d_bf16_flat_supported(s)) return ref::conv2d_forward_bf16(x, w, b, y, s);
  detail::conv2d_forward_bf16_flat(x, w, b, y, s);
}

void conv2d_backward_input_bf16_invariant(const float* dy, const float* w, float* dx,
                                          const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  if (!detail::conv2d_bf16_flat_supported(s)) return ref::conv2d_backward_input_bf16(dy, w, dx, s);
  detail::conv2d_backward_input_bf16_flat(dy, w, dx, s);
}

void conv2d_backward_weight_bf16(const float* x, const float* dy, float* dw, float* db,
                                 const Conv2dShape& s, float beta) {
  require_avx512_bf16("conv2d in bf16");
  // db: the fp32 sum of the unrounded dy, taken where dy is read anyway.
  if (conv_weight_on_gemm(s))
    detail::conv2d_backward_weight_bf16_flat(x, dy, dw, db, s, beta);
  else
    weight_by_rounded_groups(x, dy, dw, db, s, beta);
}

}  // namespace engine::kernels::cpu
