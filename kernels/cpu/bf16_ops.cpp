// kernels/cpu/bf16_ops.cpp: the bf16 layers on the vdpbf16ps GEMM (gemm_bf16.h): linear as one
// GEMM per pass, stride-1 convolutions im2col-free (conv2d_bf16.h). Shapes the GEMM does not pay
// off on (strided convolutions, odd channel counts, tiny products) take the rounding reference
// (reference_bf16.h); a single input channel's filter gradient takes it by cache-sized groups.
// All give the reference's values up to fp32 summation order.
#include "kernels/cpu/bf16_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/allocator.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/conv2d_bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/reference_bf16.h"
#include "kernels/cpu/scratch.h"

namespace engine::kernels::cpu {
namespace {

using detail::Bf16Operand;
using detail::Bf16Output;

void check(const LinearShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.in > 0 && s.out > 0, what, ": bad shape N ", s.n, " in ", s.in,
               " out ", s.out);
}

// (r, k) at p[r * rs + k * ks].
Bf16Operand strided(const float* p, int64_t rs, int64_t ks) {
  Bf16Operand o;
  o.p = p, o.rs = rs, o.ks = ks;
  return o;
}

// The GEMM's fixed costs (packing, two parallel regions) outweigh its gain below this.
constexpr double kMinMacs = 1 << 18;

bool linear_on_gemm(const LinearShape& s) {
  return static_cast<double>(s.n) * s.in * s.out >= kMinMacs;
}

// The conv passes that take the GEMM: stride 1 (forward and backward data: even channel counts,
// which excludes a first layer on one channel, whose K = KH KW is too short to gain anyway),
// products big enough to pay for the setup.
bool conv_big_enough(const Conv2dShape& s) {
  return static_cast<double>(s.y_count()) * s.k() >= kMinMacs;
}
bool conv_on_gemm(const Conv2dShape& s) {
  return detail::conv2d_bf16_flat_supported(s) && conv_big_enough(s);
}
// Filter gradients of one input channel (K = KH KW rows) measured slower than the reference.
bool conv_filter_on_gemm(const Conv2dShape& s) {
  return detail::conv2d_bf16_flat_filter_supported(s) && s.c_in > 1 && conv_big_enough(s);
}

// The reference's filter gradient (fp32 kernel on rounded copies) by groups of samples whose
// copies stay in cache (~1 MiB), each group's gradient added on (the first with beta): for
// first layers (Cin 1), too short a K for the GEMM; db (unrounded dy) summed group by group.
// Measured ~2x faster than rounding all of dy first (a pass through memory).
void filter_by_rounded_groups(const float* x, const float* dy, float* dw, float* db,
                              const Conv2dShape& s, float beta) {
  const int64_t xs = s.c_in * s.h * s.w, ys = s.c_out * s.oh() * s.ow();
  const int64_t group = std::clamp<int64_t>((1 << 18) / (xs + ys), 1, std::max<int64_t>(s.n, 1));
  Scratch<float> xr(group * xs), dyr(group * ys);
  if (s.n == 0) {
    if (db) conv2d_backward_bias(dy, db, s, beta);
    return conv2d_backward_filter(x, dy, dw, nullptr, s, beta);
  }
  for (int64_t n0 = 0; n0 < s.n; n0 += group) {
    Conv2dShape g = s;
    g.n = std::min(group, s.n - n0);
    round_to_bf16(x + n0 * xs, xr.get(), g.n * xs);
    round_to_bf16(dy + n0 * ys, dyr.get(), g.n * ys);
    conv2d_backward_filter(xr.get(), dyr.get(), dw, nullptr, g, n0 == 0 ? beta : 1.f);
    if (db) conv2d_backward_bias(dy + n0 * ys, db, g, n0 == 0 ? beta : 1.f);  // dy still cached
  }
}

}  // namespace

float round_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return std::bit_cast<float>((u | 0x00400000u) & 0xFFFF0000u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

void round_to_bf16(const float* src, float* dst, int64_t count) {
  // round_to_bf16(float) without branches, so that the compiler vectorises it.
  parallel_for(count, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const uint32_t u = std::bit_cast<uint32_t>(src[i]);
      const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
      const uint32_t r = nan ? u | 0x00400000u : u + 0x7FFFu + ((u >> 16) & 1u);
      dst[i] = std::bit_cast<float>(r & 0xFFFF0000u);
    }
  });
}

void linear_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const LinearShape& s) {
  require_avx512_bf16("linear in bf16");
  check(s, "linear_forward_bf16");
  if (!linear_on_gemm(s)) return linear_forward_bf16_reference(x, w, b, y, s);
  // y (N, out) = x (N, in) w^T; w as the (out, in) operand.
  Bf16Output c;
  c.c = y, c.ldc = s.out, c.bias = b;
  detail::gemm_bf16(s.n, s.out, s.in, strided(x, s.in, 1), strided(w, s.in, 1), c);
}

void linear_backward_data_bf16(const float* dy, const float* w, float* dx, const LinearShape& s) {
  require_avx512_bf16("linear in bf16");
  check(s, "linear_backward_data_bf16");
  if (!linear_on_gemm(s)) return linear_backward_data_bf16_reference(dy, w, dx, s);
  // dx (N, in) = dy (N, out) w (out, in); w as the (in, out) operand.
  Bf16Output c;
  c.c = dx, c.ldc = s.in;
  detail::gemm_bf16(s.n, s.in, s.out, strided(dy, s.out, 1), strided(w, 1, s.in), c);
}

void linear_backward_weight_bf16(const float* dy, const float* x, float* dw, const LinearShape& s,
                                 float beta) {
  require_avx512_bf16("linear in bf16");
  check(s, "linear_backward_weight_bf16");
  if (!linear_on_gemm(s)) return linear_backward_weight_bf16_reference(dy, x, dw, s, beta);
  // dw (out, in) = dy^T (out, N) x (N, in) (+ beta dw): both read with N as the reduction.
  Bf16Output c;
  c.c = dw, c.ldc = s.in, c.beta = beta;
  detail::gemm_bf16(s.out, s.in, s.n, strided(dy, 1, s.out), strided(x, 1, s.in), c);
}

void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  if (!conv_on_gemm(s)) return conv2d_forward_bf16_reference(x, w, b, y, s);
  detail::conv2d_forward_bf16_flat(x, w, b, y, s);
}

void conv2d_backward_data_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  if (!conv_on_gemm(s)) return conv2d_backward_data_bf16_reference(dy, w, dx, s);
  detail::conv2d_backward_data_bf16_flat(dy, w, dx, s);
}

void conv2d_backward_filter_bf16(const float* x, const float* dy, float* dw, float* db,
                                 const Conv2dShape& s, float beta) {
  require_avx512_bf16("conv2d in bf16");
  // db: the fp32 sum of the unrounded dy, taken where dy is read anyway.
  if (conv_filter_on_gemm(s))
    detail::conv2d_backward_filter_bf16_flat(x, dy, dw, db, s, beta);
  else
    filter_by_rounded_groups(x, dy, dw, db, s, beta);
}

}  // namespace engine::kernels::cpu
