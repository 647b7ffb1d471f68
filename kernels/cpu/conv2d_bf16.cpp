// kernels/cpu/conv2d_bf16.cpp: the stride-1 convolution passes of conv2d_bf16.h.
#include "kernels/cpu/conv2d_bf16.h"

#include <algorithm>
#include <cstring>

#include "core/allocator.h"
#include "core/thread_pool.h"
#include "kernels/cpu/gemm_bf16.h"

namespace engine::kernels::cpu::detail {
namespace {

// T blocks of the CPU allocator's cache, freed on scope exit.
template <class T>
class Block {
 public:
  explicit Block(int64_t count)
      : n_(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)),
        p_(static_cast<T*>(cpu_allocator::alloc(n_))) {}
  ~Block() { cpu_allocator::free(p_, n_); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  T* get() const { return p_; }

 private:
  size_t n_;
  T* p_;
};

// One stride-1 convolution: input (n, c, h, w) padded by (ph, pw) on each side.
struct Flat {
  int64_t n, c, h, w, ph, pw, kh, kw;
  int64_t hp() const { return h + 2 * ph; }
  int64_t wp() const { return w + 2 * pw; }
  int64_t oh() const { return hp() - kh + 1; }
  int64_t ow() const { return wp() - kw + 1; }
  int64_t q() const { return oh() * wp(); }  // flat output positions of a sample
  int64_t k() const { return c * kh * kw; }
};

// xp (n, per_sample) = x zero-padded to (c, Hp, Wp) planes, zeros after each sample's planes.
void pad_input(const float* x, const Flat& f, int64_t per_sample, float* xp) {
  const int64_t plane = f.hp() * f.wp();
  parallel_for(f.n, 1, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float* dst = xp + n * per_sample;
      std::memset(dst, 0, sizeof(float) * per_sample);
      for (int64_t ci = 0; ci < f.c; ++ci)
        for (int64_t i = 0; i < f.h; ++i)
          std::memcpy(dst + ci * plane + (i + f.ph) * f.wp() + f.pw,
                      x + ((n * f.c + ci) * f.h + i) * f.w, sizeof(float) * f.w);
    }
  });
}

// offsets[k] of input k = (ci, kh, kw) in a padded sample.
void kernel_offsets(const Flat& f, int64_t* off) {
  for (int64_t ci = 0; ci < f.c; ++ci)
    for (int64_t i = 0; i < f.kh; ++i)
      for (int64_t j = 0; j < f.kw; ++j)
        off[(ci * f.kh + i) * f.kw + j] = ci * f.hp() * f.wp() + i * f.wp() + j;
}

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// y (n, c_out, OH, OW) = conv(x, weight) (+ bias): weight read as the (c_out, K) operand wt.
void flat_forward(const float* x, const Flat& f, const Bf16Operand& wt, int64_t c_out,
                  const float* bias, float* y) {
  const int64_t qs = round_up(f.q(), 16), wp = f.wp(), ow = f.ow(), p = f.oh() * ow;
  // Rows of the last panel of a sample read up to qs - q + wp past its planes.
  const int64_t per_sample = f.c * f.hp() * wp + qs - f.q() + wp;
  Block<float> xp(f.n * per_sample);
  Block<int64_t> koff(f.k()), rows(f.n * qs);
  pad_input(x, f, per_sample, xp.get());
  kernel_offsets(f, koff.get());
  for (int64_t n = 0; n < f.n; ++n)
    for (int64_t q = 0; q < qs; ++q)
      rows.get()[n * qs + q] = q < f.q() && q % wp < ow ? n * c_out * p + q / wp * ow + q % wp : -1;
  Bf16Operand a;
  a.p = xp.get(), a.rs = 1, a.r_block = qs, a.r_block_stride = per_sample, a.k_off = koff.get();
  Bf16Output out;
  out.c = y, out.cs = p, out.row_off = rows.get(), out.bias = bias;
  gemm_bf16(f.n * qs, c_out, f.k(), a, wt, out);
}

}  // namespace

bool conv2d_bf16_flat_supported(const Conv2dShape& s) {
  return s.stride == 1 && s.pad <= s.kh - 1 && s.pad <= s.kw - 1;
}

void conv2d_forward_bf16_flat(const float* x, const float* w, const float* b, float* y,
                              const Conv2dShape& s) {
  Bf16Operand wt;  // (co, k) at w[co * K + k]
  wt.p = w, wt.rs = s.k(), wt.ks = 1;
  flat_forward(x, {s.n, s.c_in, s.h, s.w, s.pad, s.pad, s.kh, s.kw}, wt, s.c_out, b, y);
}

void conv2d_backward_data_bf16_flat(const float* dy, const float* w, float* dx,
                                    const Conv2dShape& s) {
  // dx[ci] = sum over (co, i, j) of w[co, ci, KH-1-i, KW-1-j] dy[co] padded by (KH-1-pad) at
  // (i, j): w' (ci, (co, i, j)) at w[co * Cin * KH * KW + ci * KH * KW + flipped (i, j)].
  const int64_t khw = s.kh * s.kw, k = s.c_out * khw;
  Block<int64_t> koff(k);
  for (int64_t co = 0; co < s.c_out; ++co)
    for (int64_t r = 0; r < khw; ++r) koff.get()[co * khw + r] = co * s.c_in * khw + khw - 1 - r;
  Bf16Operand wt;
  wt.p = w, wt.rs = khw, wt.k_off = koff.get();
  flat_forward(dy, {s.n, s.c_out, s.oh(), s.ow(), s.kh - 1 - s.pad, s.kw - 1 - s.pad, s.kh, s.kw},
               wt, s.c_in, nullptr, dx);
}

void conv2d_backward_filter_bf16_flat(const float* x, const float* dy, float* dw,
                                      const Conv2dShape& s, float beta) {
  const Flat f{s.n, s.c_in, s.h, s.w, s.pad, s.pad, s.kh, s.kw};
  // Reduction over (n, q), q < qs; each sample's run a multiple of 32 (the packer's chunk).
  const int64_t qs = round_up(f.q(), 32), wp = f.wp(), ow = f.ow(), oh = f.oh();
  const int64_t per_sample = f.c * f.hp() * wp + qs - f.q() + wp;
  Block<float> xp(s.n * per_sample), dyf(s.n * s.c_out * qs);
  Block<int64_t> koff(f.k());
  pad_input(x, f, per_sample, xp.get());
  kernel_offsets(f, koff.get());
  // dyf (n, c_out, qs): dy on the flat positions, zeros on the dropped ones (they meet finite
  // padding or next-row inputs in xp, so they add exact zeros).
  parallel_for(s.n * s.c_out, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* dst = dyf.get() + r * qs;
      std::memset(dst, 0, sizeof(float) * qs);
      for (int64_t i = 0; i < oh; ++i)
        std::memcpy(dst + i * wp, dy + (r * oh + i) * ow, sizeof(float) * ow);
    }
  });
  Bf16Operand a;  // col (k, (n, q)) at xp[koff[k] + n * per_sample + q]
  a.p = xp.get(), a.r_off = koff.get(), a.ks = 1, a.k_block = qs, a.k_block_stride = per_sample;
  Bf16Operand b;  // dy ((n, q), co) at dyf[(n * c_out + co) * qs + q]
  b.p = dyf.get(), b.rs = qs, b.ks = 1, b.k_block = qs, b.k_block_stride = s.c_out * qs;
  Bf16Output out;  // dw^T (k, co) at dw[co * K + k]
  out.c = dw, out.ldc = 1, out.cs = f.k(), out.beta = beta;
  gemm_bf16(f.k(), s.c_out, s.n * qs, a, b, out);
}

}  // namespace engine::kernels::cpu::detail
