// kernels/cpu/bf16_ops.cpp: rounding to bf16 and the bf16 linear layer on the vdpbf16ps GEMM
// (gemm_bf16.h), one GEMM per pass; products too small for the GEMM take the rounding reference
// (reference_bf16.h). The convolutions are in conv2d/bf16.cpp.
#include "kernels/cpu/bf16_ops.h"

#include <bit>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/reference_bf16.h"
#include "kernels/half.h"

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

bool linear_on_gemm(const LinearShape& s) {
  return static_cast<double>(s.n) * s.in * s.out >= detail::kBf16GemmMinMacs;
}

// y (N, out) = x (N, in) w^T; w as the (out, in) operand.
void forward_on_gemm(const float* x, const float* w, const float* b, float* y,
                     const LinearShape& s) {
  Bf16Output c;
  c.c = y, c.ldc = s.out, c.bias = b;
  detail::gemm_bf16(s.n, s.out, s.in, strided(x, s.in, 1), strided(w, s.in, 1), c);
}

// dx (N, in) = dy (N, out) w (out, in); w as the (in, out) operand.
void backward_data_on_gemm(const float* dy, const float* w, float* dx, const LinearShape& s) {
  Bf16Output c;
  c.c = dx, c.ldc = s.in;
  detail::gemm_bf16(s.n, s.in, s.out, strided(dy, s.out, 1), strided(w, 1, s.in), c);
}

}  // namespace

float round_to_bf16(float x) {
  return f32_from_bf16(bf16_from_f32(x));  // kernels/half.h's rounding
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
  if (!linear_on_gemm(s)) return ref::linear_forward_bf16(x, w, b, y, s);
  forward_on_gemm(x, w, b, y, s);
}

void linear_backward_data_bf16(const float* dy, const float* w, float* dx, const LinearShape& s) {
  require_avx512_bf16("linear in bf16");
  check(s, "linear_backward_data_bf16");
  if (!linear_on_gemm(s)) return ref::linear_backward_data_bf16(dy, w, dx, s);
  backward_data_on_gemm(dy, w, dx, s);
}

void linear_forward_bf16_invariant(const float* x, const float* w, const float* b, float* y,
                                   const LinearShape& s) {
  require_avx512_bf16("linear in bf16");
  check(s, "linear_forward_bf16_invariant");
  forward_on_gemm(x, w, b, y, s);
}

void linear_backward_data_bf16_invariant(const float* dy, const float* w, float* dx,
                                         const LinearShape& s) {
  require_avx512_bf16("linear in bf16");
  check(s, "linear_backward_data_bf16_invariant");
  backward_data_on_gemm(dy, w, dx, s);
}

void linear_backward_weight_bf16(const float* dy, const float* x, float* dw, const LinearShape& s,
                                 float beta) {
  require_avx512_bf16("linear in bf16");
  check(s, "linear_backward_weight_bf16");
  if (!linear_on_gemm(s)) return ref::linear_backward_weight_bf16(dy, x, dw, s, beta);
  // dw (out, in) = dy^T (out, N) x (N, in) (+ beta dw): both read with N as the reduction.
  Bf16Output c;
  c.c = dw, c.ldc = s.in, c.beta = beta;
  detail::gemm_bf16(s.out, s.in, s.n, strided(dy, 1, s.out), strided(x, 1, s.in), c);
}

}  // namespace engine::kernels::cpu
