// kernels/cpu/conv2d/bf16_flat.cpp: the stride-1 bf16 convolution passes of bf16_flat.h.
#include "kernels/cpu/conv2d/bf16_flat.h"

#include <algorithm>
#include <cstring>

#include "core/allocator.h"
#include "core/thread_pool.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/scratch.h"

namespace engine::kernels::cpu::detail {
namespace {

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

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// xw (n1 - n0, per_sample) words: samples [n0, n1) of x zero-padded to (c / 2, Hp, Wp) planes of
// bf16 channel pairs (low: channel 2i, high: 2i + 1), zeros after each sample's planes.
void pad_pairs(const float* x, const Flat& f, int64_t per_sample, int64_t n0, int64_t n1,
               uint32_t* xw) {
  const int64_t plane = f.hp() * f.wp(), cp = f.c / 2, hw = f.h * f.w;
  for (int64_t n = n0; n < n1; ++n) {
    uint32_t* dst = xw + (n - n0) * per_sample;
    for (int64_t c = 0; c < cp; ++c) {
      const float* lo = x + (n * f.c + 2 * c) * hw;
      bf16_pairs_plane(lo, lo + hw, f.h, f.w, f.ph, f.pw, f.hp(), f.wp(), dst + c * plane);
    }
    std::memset(dst + cp * plane, 0, sizeof(uint32_t) * (per_sample - cp * plane));
  }
}

// xb (n1 - n0, per_sample): samples [n0, n1) of x zero-padded to (c, Hp, Wp) planes of bf16,
// zeros after each sample's.
void pad_bf16(const float* x, const Flat& f, int64_t per_sample, int64_t n0, int64_t n1,
              uint16_t* xb) {
  const int64_t plane = f.hp() * f.wp(), hw = f.h * f.w;
  for (int64_t n = n0; n < n1; ++n) {
    uint16_t* dst = xb + (n - n0) * per_sample;
    for (int64_t c = 0; c < f.c; ++c)
      bf16_plane(x + (n * f.c + c) * hw, f.h, f.w, f.ph, f.pw, f.hp(), f.wp(), dst + c * plane);
    std::memset(dst + f.c * plane, 0, sizeof(uint16_t) * (per_sample - f.c * plane));
  }
}

// The weight as the (c_out, K) operand of the forwards, whose K runs over (channel pair, kh, kw,
// channel parity): out channel j, input channel ch, kernel offset r at w[j * j_stride + ch *
// ch_stride + (flip ? KH KW - 1 - r : r)].
struct WeightView {
  const float* w;
  int64_t j_stride, ch_stride;
  bool flip;
};

// A forward over groups of samples: pad_pairs of a group, then gemm(group's first sample, its
// size, its pairs). With enough samples each thread takes whole groups (sized to stay in L2:
// the conversion pass and the GEMM share the cache) and runs their GEMMs serially; else one
// group of all samples, converted and multiplied on all threads.
template <class Gemm>
void by_sample_groups(const float* x, const Flat& f, int64_t per_sample, const Gemm& gemm) {
  const int64_t group = std::clamp<int64_t>((1 << 17) / per_sample, 1, f.n);
  if (f.n >= 2 * num_threads() && group < f.n) {
    parallel_for(f.n, 1, [&](int64_t n0, int64_t n1) {
      Scratch<uint32_t> xw(group * per_sample);
      for (int64_t g0 = n0; g0 < n1; g0 += group) {
        const int64_t g1 = std::min(n1, g0 + group);
        pad_pairs(x, f, per_sample, g0, g1, xw.get());
        gemm(g0, g1 - g0, xw.get(), true);
      }
    });
    return;
  }
  Scratch<uint32_t> xw(f.n * per_sample);
  parallel_for(f.n, 1, [&](int64_t n0, int64_t n1) {
    pad_pairs(x, f, per_sample, n0, n1, xw.get() + n0 * per_sample);
  });
  gemm(0, f.n, xw.get(), false);
}

// The weight's k offsets in the forwards' K order (2 per channel pair and kernel offset), and
// the input's, in bf16 elements of xw, per pair.
void forward_offsets(const Flat& f, const WeightView& wv, int64_t* w_off, int64_t* x_off) {
  const int64_t khw = f.kh * f.kw, plane = f.hp() * f.wp();
  for (int64_t cp = 0; cp < f.c / 2; ++cp)
    for (int64_t r = 0; r < khw; ++r) {
      const int64_t kk = cp * khw + r, rw = wv.flip ? khw - 1 - r : r;
      x_off[kk] = 2 * (cp * plane + r / f.kw * f.wp() + r % f.kw);
      w_off[2 * kk] = 2 * cp * wv.ch_stride + rw;
      w_off[2 * kk + 1] = (2 * cp + 1) * wv.ch_stride + rw;
    }
}

// y (n, c_out, OH, OW) = conv(x, weight) (+ bias). f.c must be even. C (c_out, (n, q)) = w
// (c_out, K) col (K, (n, q)), whose B (col) the microkernel reads from xw in place.
void flat_forward(const float* x, const Flat& f, const WeightView& wv, int64_t c_out,
                  const float* bias, float* y) {
  const int64_t qs = round_up(f.q(), 32), wp = f.wp(), ow = f.ow(), p = f.oh() * ow;
  const int64_t kp = f.c / 2 * f.kh * f.kw;
  // The last panel of a sample reads up to qs - q + wp words past its planes.
  const int64_t per_sample = f.c / 2 * f.hp() * wp + qs - f.q() + wp;
  Scratch<int64_t> xoff(kp), woff(2 * kp), cols(f.n * qs);
  forward_offsets(f, wv, woff.get(), xoff.get());
  // Output (i, j) of sample n is column n qs + i Wp + j; the rest are dropped (-1). Built on all
  // threads: serial, it was ~5% of a two-thread forward.
  parallel_for(f.n, 8, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      int64_t* col = cols.get() + n * qs;
      std::fill(col, col + qs, int64_t{-1});
      for (int64_t i = 0; i < f.oh(); ++i)
        for (int64_t j = 0; j < ow; ++j) col[i * wp + j] = n * c_out * p + i * ow + j;
    }
  });
  Bf16Operand a;
  a.p = wv.w, a.rs = wv.j_stride, a.k_off = woff.get();
  const int mr = bf16_panel_mr(qs);  // every group's n is a multiple of qs (of 32)
  Scratch<uint32_t> wpk((c_out + mr - 1) / mr * mr * kp);
  pack_bf16(a, c_out, 2 * kp, mr, wpk.get());
  a.packed = wpk.get();
  by_sample_groups(x, f, per_sample, [&](int64_t n0, int64_t count, uint32_t* xw, bool serial) {
    Bf16Operand b;  // pair kk of position (n, q) at word n * per_sample + q + xoff[kk] / 2
    b.bf16 = reinterpret_cast<const uint16_t*>(xw), b.rs = 2, b.r_block = qs,
    b.r_block_stride = 2 * per_sample, b.k_off = xoff.get();
    Bf16Output out;
    out.c = y + n0 * c_out * p, out.ldc = p, out.col_off = cols.get(), out.row_bias = bias;
    gemm_bf16(c_out, count * qs, 2 * kp, a, b, out, serial);
  });
}

// The same, as C ((n, p), c_out) = col ((n, p), K) w^T (K, c_out) over the valid positions
// only: A (col) read in place from xw through a table of row offsets.
void rows_forward(const float* x, const Flat& f, const WeightView& wv, int64_t c_out,
                  const float* bias, float* y) {
  const int64_t wp = f.wp(), ow = f.ow(), p = f.oh() * ow, kp = f.c / 2 * f.kh * f.kw;
  const int64_t per_sample = f.c / 2 * f.hp() * wp + wp;
  Scratch<int64_t> xoff(kp), woff(2 * kp), arows(f.n * p), crows(f.n * p);
  forward_offsets(f, wv, woff.get(), xoff.get());
  parallel_for(f.n, 8, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t i = 0; i < f.oh(); ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t q = n * p + i * ow + j;
          arows.get()[q] = 2 * (n * per_sample + i * wp + j);
          crows.get()[q] = n * c_out * p + i * ow + j;
        }
  });
  Bf16Operand b;
  b.p = wv.w, b.rs = wv.j_stride, b.k_off = woff.get();
  const int nr = bf16_panel_nr(c_out);
  Scratch<uint32_t> wpk((c_out + nr - 1) / nr * nr * kp);
  pack_bf16(b, c_out, 2 * kp, nr, wpk.get());
  b.packed = wpk.get();
  by_sample_groups(x, f, per_sample, [&](int64_t n0, int64_t count, uint32_t* xw, bool serial) {
    Bf16Operand a;
    a.bf16 = reinterpret_cast<const uint16_t*>(xw), a.r_off = arows.get(), a.k_off = xoff.get();
    Bf16Output out;
    out.c = y + n0 * c_out * p, out.cs = p, out.row_off = crows.get(), out.bias = bias;
    gemm_bf16(count * p, c_out, 2 * kp, a, b, out, serial);
  });
}

// flat_forward's microkernel runs at its peak but computes round_up(OH Wp, 32) positions for OH OW
// outputs; rows_forward computes the outputs alone, a little slower each (eight row pointers,
// transposed stores). Measured on Zen 5: flat while it wastes under ~15%, or for narrow c_out.
void conv_forward(const float* x, const Flat& f, const WeightView& wv, int64_t c_out,
                  const float* bias, float* y) {
  const double useful = static_cast<double>(f.oh() * f.ow()) / round_up(f.q(), 32);
  // rows_forward's tiles are 8 x 32 unless c_out fits 16-column panels better (then 16 rows,
  // whose 16 row pointers spill: measured 2x slower).
  if (useful >= 0.85 || bf16_panel_nr(c_out) != 32)
    flat_forward(x, f, wv, c_out, bias, y);
  else
    rows_forward(x, f, wv, c_out, bias, y);
}

// koff[(ci * KH + i) * KW + j]: where tap (ci, i, j) starts in a padded sample (rows of wp).
void weight_offsets(const Flat& f, int64_t wp, int64_t* koff) {
  for (int64_t ci = 0; ci < f.c; ++ci)
    for (int64_t i = 0; i < f.kh; ++i)
      for (int64_t j = 0; j < f.kw; ++j)
        koff[(ci * f.kh + i) * f.kw + j] = ci * f.hp() * wp + i * wp + j;
}

// Pair m of sample n (of a group): positions 2m, 2m + 1 of the reduction, in rows of rw, at
// pairs[n * qs / 2 + m] from a tap's start in the padded input (rows of wp); past the `used`
// positions the sample's first (finite) inputs, which meet zeros in dy.
void pair_offsets(int64_t group, int64_t qs, int64_t per_sample, int64_t used, int64_t rw,
                  int64_t wp, int64_t* pairs) {
  for (int64_t n = 0; n < group; ++n)
    for (int64_t m = 0; m < qs / 2; ++m) {
      const int64_t q = 2 * m;
      pairs[n * qs / 2 + m] = n * per_sample + (q < used ? q / rw * wp + q % rw : 0);
    }
}

// db[co] = sum over n of plane_sums[n * c_out + co] in double, as conv2d_backward_bias (the same
// bits), plus beta db[co] when beta is not 0.
void bias_from_plane_sums(const float* plane_sums, int64_t n, int64_t c_out, float beta,
                          float* db) {
  for (int64_t co = 0; co < c_out; ++co) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) acc += plane_sums[i * c_out + co];
    db[co] = beta == 0.f ? static_cast<float>(acc) : beta * db[co] + static_cast<float>(acc);
  }
}

// dw[i] = the sum of the groups' partial[g * count + i] in group order (+ beta dw[i]).
// Blocks of 256 elements, the groups added row by row (vectorised across elements).
void add_partials(const float* partial, int64_t groups, int64_t count, float beta, float* dw) {
  constexpr int64_t kBlock = 256;
  parallel_for((count + kBlock - 1) / kBlock, 4, [&](int64_t b0, int64_t b1) {
    float sum[kBlock];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b * kBlock, len = std::min(kBlock, count - i0);
      std::fill(sum, sum + len, 0.f);
      for (int64_t g = 0; g < groups; ++g) {
        const float* p = partial + g * count + i0;
        for (int64_t j = 0; j < len; ++j) sum[j] += p[j];
      }
      for (int64_t j = 0; j < len; ++j)
        dw[i0 + j] = beta == 0.f ? sum[j] : beta * dw[i0 + j] + sum[j];
    }
  });
}

}  // namespace

bool conv2d_bf16_flat_supported(const Conv2dShape& s) {
  return s.stride == 1 && s.pad <= s.kh - 1 && s.pad <= s.kw - 1 && s.c_in % 2 == 0 &&
         s.c_out % 2 == 0;
}

bool conv2d_bf16_flat_weight_supported(const Conv2dShape& s) {
  return s.stride == 1;
}

void conv2d_forward_bf16_flat(const float* x, const float* w, const float* b, float* y,
                              const Conv2dShape& s) {
  const WeightView wv{w, s.k(), s.kh * s.kw, false};  // w[co][ci][r]
  conv_forward(x, {s.n, s.c_in, s.h, s.w, s.pad, s.pad, s.kh, s.kw}, wv, s.c_out, b, y);
}

void conv2d_backward_input_bf16_flat(const float* dy, const float* w, float* dx,
                                     const Conv2dShape& s) {
  // dx[ci] = sum over (co, i, j) of w[co, ci, KH-1-i, KW-1-j] dy[co] padded by (KH-1-pad) at
  // (i, j): out channel ci, input channel co, flipped offsets.
  const WeightView wv{w, s.kh * s.kw, s.c_in * s.kh * s.kw, true};
  conv_forward(dy, {s.n, s.c_out, s.oh(), s.ow(), s.kh - 1 - s.pad, s.kw - 1 - s.pad, s.kh, s.kw},
               wv, s.c_in, nullptr, dx);
}

void conv2d_backward_weight_bf16_flat(const float* x, const float* dy, float* dw, float* db,
                                      const Conv2dShape& s, float beta) {
  const Flat f{s.n, s.c_in, s.h, s.w, s.pad, s.pad, s.kh, s.kw};
  const int64_t wp = f.wp(), ow = f.ow(), oh = f.oh(), k = f.k(), c_out = s.c_out;
  // The reduction runs over positions (n, i, j) in rows of rw: the outputs alone (rw = OW) when
  // OW is even, so that no pair (j, j + 1) straddles two rows, else flat rows (rw = Wp, zeros
  // past OW). Each sample's run is padded with zeros to qs: even, so that pairs never straddle
  // samples, and at least 32, the packer's run (which it reads across two samples in two parts).
  const int64_t rw = ow % 2 == 0 ? ow : wp, qs = std::max<int64_t>(round_up(oh * rw, 2), 32);
  const int64_t per_sample = round_up(f.c * f.hp() * wp + wp, 2);
  // Samples in groups of ~512 KiB of operands (fixed by the shape, not the thread count): each
  // thread converts whole groups and sums each into its own dw^T, added up in group order.
  const int64_t bytes = per_sample * 2 + c_out * qs * 4;
  const int64_t group = std::clamp<int64_t>((1 << 19) / bytes, 1, s.n);
  const int64_t groups = (s.n + group - 1) / group;
  Scratch<int64_t> koff(k), pairs(group * qs / 2);
  Scratch<float> plane_sums(db ? s.n * c_out : 1);
  weight_offsets(f, wp, koff.get());
  pair_offsets(group, qs, per_sample, oh * rw, rw, wp, pairs.get());
  // dy's planes are already runs of qs (OW even, OH OW even): the GEMM packs them in place, no
  // copy into dyf (which held 2x the conversion's memory traffic).
  const bool dy_in_place = rw == ow && oh * ow == qs;
  // Samples [n0, n1) into xb and dyf (n, c_out, qs): dy in rows of rw, zeros elsewhere; then
  // dw^T (k, co) of them at out[co * K + k] (+ beta out).
  auto run = [&](int64_t n0, int64_t n1, uint16_t* xb, float* dyf, float* out, float b_out,
                 bool serial) {
    auto fill = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* src = dy + (n0 * c_out + r) * oh * ow;
        if (db) plane_sums.get()[n0 * c_out + r] = sum_block(src, oh * ow);
        if (dy_in_place) continue;
        float* dst = dyf + r * qs;
        for (int64_t i = 0; i < oh; ++i) {
          std::memcpy(dst + i * rw, src + i * ow, sizeof(float) * ow);
          std::memset(dst + i * rw + ow, 0, sizeof(float) * (rw - ow));
        }
        std::memset(dst + oh * rw, 0, sizeof(float) * (qs - oh * rw));
      }
    };
    if (serial) {
      pad_bf16(x, f, per_sample, n0, n1, xb);
      fill(0, (n1 - n0) * c_out);
    } else {
      parallel_for(n1 - n0, 1, [&](int64_t a0, int64_t a1) {
        pad_bf16(x, f, per_sample, n0 + a0, n0 + a1, xb + a0 * per_sample);
      });
      if (db || !dy_in_place) parallel_for((n1 - n0) * c_out, 4, fill);
    }
    Bf16Operand a;  // col (k, (n, q)): pair m at xb[koff[k] + pairs[m]]
    a.bf16 = xb, a.r_off = koff.get(), a.k_off = pairs.get();
    Bf16Operand b;  // dy ((n, q), co) at dyf[(n * c_out + co) * qs + q]
    b.p = dy_in_place ? dy + n0 * c_out * qs : dyf, b.rs = qs, b.ks = 1, b.k_block = qs,
    b.k_block_stride = c_out * qs;
    Bf16Output o;
    o.c = out, o.ldc = 1, o.cs = k, o.beta = b_out;
    gemm_bf16(k, c_out, (n1 - n0) * qs, a, b, o, serial);
  };
  auto bias = [&] {
    if (db) bias_from_plane_sums(plane_sums.get(), s.n, c_out, beta, db);
  };

  if (groups == 1) {
    Scratch<uint16_t> xb(s.n * per_sample);
    Scratch<float> dyf(dy_in_place ? 1 : s.n * c_out * qs);
    run(0, s.n, xb.get(), dyf.get(), dw, beta, false);
    bias();
    return;
  }
  Scratch<float> partial(groups * c_out * k);
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    Scratch<uint16_t> xb(group * per_sample);
    Scratch<float> dyf(dy_in_place ? 1 : group * c_out * qs);
    for (int64_t g = g0; g < g1; ++g)
      run(g * group, std::min(s.n, (g + 1) * group), xb.get(), dyf.get(),
          partial.get() + g * c_out * k, 0.f, true);
  });
  add_partials(partial.get(), groups, c_out * k, beta, dw);
  bias();
}

}  // namespace engine::kernels::cpu::detail
