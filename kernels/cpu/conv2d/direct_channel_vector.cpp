// kernels/cpu/conv2d/direct_channel_vector.cpp: the "channel-vector" (cv) stride-1 direct
// convolution kernels (AVX-512): vectors of 16 output channels (ConvAlgo::ChannelVector).
//
// Forward: a tile holds NJ consecutive outputs of one row for 16*OCV output channels, one vector
// of 16 channels per position; per tap it loads OCV weight vectors and broadcasts NJ inputs:
//   acc[j][co] += w[co][ci][kh][kw] * xp[ci][oh + kh][ow0 + j + kw].
// No output position is wasted; channels pad to 16. The tile is transposed to (C, NJ) rows on
// the way out.
// Backward-weight: dy is transposed to (positions, channels); a tile holds R kernel rows x KW
// taps for 16*OCV channels and runs over every position of the chunk:
//   acc[tap][co] += dyt[p][co] * xp[ci][oh + kh][ow + kw],
// so the reduction stays in vector lanes of distinct channels (no horizontal sums).
#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/conv2d/direct_simd.h"

#if defined(__AVX512F__)

namespace engine::kernels::cpu::detail {
namespace {

constexpr int kMaxNJ1 = 28, kMaxNJ2 = 14;  // tile widths for OCV = 1 and 2 (<= 31 registers)
constexpr int64_t kMaxNJ = kMaxNJ1;

// ---- forward ----

// tmp (NJ, 16*OCV) = one tile; xrow = xp + oh*Wp + ow0.
template <int OCV, int NJ>
void forward_tile(const float* xrow, const Geometry& g, int64_t kh_lo, int64_t kh_hi,
                  const float* w, const float* bias, float* tmp) {
  __m512 acc[NJ][OCV];
  for (int v = 0; v < OCV; ++v) {
    __m512 b = bias ? _mm512_loadu_ps(bias + v * kLanes) : _mm512_setzero_ps();
    for (int j = 0; j < NJ; ++j) acc[j][v] = b;
  }
  const int64_t plane = g.plane(), wp = g.wp, kw = g.kw;
  for (int64_t ci = 0; ci < g.c_in; ++ci)
    for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
      const float* row = xrow + ci * plane + kh * wp;
      const float* wk = w + (ci * g.kh + kh) * kw * OCV * kLanes;
      for (int64_t c = 0; c < kw; ++c, wk += OCV * kLanes) {
        __m512 wv[OCV];
        for (int v = 0; v < OCV; ++v) wv[v] = _mm512_loadu_ps(wk + v * kLanes);
        // Opaque to GCC, which would otherwise carry the overlapping row[c + j] of successive c
        // in scalar registers and spill them (predictive commoning), instead of broadcasting.
        const float* xr = row + c;
        asm("" : "+r"(xr));
        for (int j = 0; j < NJ; ++j) {
          __m512 xb = _mm512_set1_ps(xr[j]);
          for (int v = 0; v < OCV; ++v) acc[j][v] = _mm512_fmadd_ps(wv[v], xb, acc[j][v]);
        }
      }
    }
  for (int j = 0; j < NJ; ++j)
    for (int v = 0; v < OCV; ++v) _mm512_storeu_ps(tmp + (j * OCV + v) * kLanes, acc[j][v]);
}

// The same tile for a compile-time kernel width: per kernel row, the KW * OCV weight vectors
// stay in registers and each input of the row is broadcast once and used for every tap that
// reads it (NJ + KW - 1 broadcasts instead of NJ * KW): broadcasts, not FMAs, bound the generic
// tile when OCV is 1.
template <int OCV, int NJ, int KW>
void forward_tile_kw(const float* xrow, const Geometry& g, int64_t kh_lo, int64_t kh_hi,
                     const float* w, const float* bias, float* tmp) {
  __m512 acc[NJ][OCV];
  for (int v = 0; v < OCV; ++v) {
    __m512 b = bias ? _mm512_loadu_ps(bias + v * kLanes) : _mm512_setzero_ps();
    for (int j = 0; j < NJ; ++j) acc[j][v] = b;
  }
  const int64_t plane = g.plane(), wp = g.wp;
  for (int64_t ci = 0; ci < g.c_in; ++ci)
    for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
      const float* row = xrow + ci * plane + kh * wp;
      const float* wk = w + (ci * g.kh + kh) * KW * OCV * kLanes;
      __m512 wv[KW][OCV];
      for (int c = 0; c < KW; ++c)
        for (int v = 0; v < OCV; ++v) wv[c][v] = _mm512_loadu_ps(wk + (c * OCV + v) * kLanes);
#pragma GCC unroll 64
      for (int col = 0; col < NJ + KW - 1; ++col) {
        const __m512 xb = _mm512_set1_ps(row[col]);
#pragma GCC unroll 8
        for (int c = 0; c < KW; ++c) {
          const int j = col - c;
          if (j < 0 || j >= NJ) continue;
          for (int v = 0; v < OCV; ++v) acc[j][v] = _mm512_fmadd_ps(wv[c][v], xb, acc[j][v]);
        }
      }
    }
  for (int j = 0; j < NJ; ++j)
    for (int v = 0; v < OCV; ++v) _mm512_storeu_ps(tmp + (j * OCV + v) * kLanes, acc[j][v]);
}

using ForwardTile = void (*)(const float*, const Geometry&, int64_t, int64_t, const float*,
                             const float*, float*);

// Widest tiles of forward_tile_kw within 31 registers: NJ*OCV accumulators + KW*OCV weights + 1.
constexpr int kw_max_nj(int ocv, int kw) {
  return (31 - kw * ocv) / ocv;
}

template <int OCV, int KW, int... NJ>
constexpr auto forward_kw_table(std::integer_sequence<int, NJ...>) {
  return std::array<ForwardTile, sizeof...(NJ)>{forward_tile_kw<OCV, NJ + 1, KW>...};
}
constexpr auto kForward1K3 =
    forward_kw_table<1, 3>(std::make_integer_sequence<int, kw_max_nj(1, 3)>{});
constexpr auto kForward1K5 =
    forward_kw_table<1, 5>(std::make_integer_sequence<int, kw_max_nj(1, 5)>{});
constexpr auto kForward2K3 =
    forward_kw_table<2, 3>(std::make_integer_sequence<int, kw_max_nj(2, 3)>{});
constexpr auto kForward2K5 =
    forward_kw_table<2, 5>(std::make_integer_sequence<int, kw_max_nj(2, 5)>{});

template <int OCV, int... NJ>
constexpr auto forward_table(std::integer_sequence<int, NJ...>) {
  return std::array<ForwardTile, sizeof...(NJ)>{forward_tile<OCV, NJ + 1>...};
}
constexpr auto kForward1 = forward_table<1>(std::make_integer_sequence<int, kMaxNJ1>{});
constexpr auto kForward2 = forward_table<2>(std::make_integer_sequence<int, kMaxNJ2>{});

// y rows: channel c of the tile, positions [0, nj) -> y + c*plane. tmp (nj, 16*ocv).
void store_transposed(const float* tmp, int64_t ocv, int64_t nj, int64_t n_ch, float* y,
                      int64_t plane) {
  const int64_t width = ocv * kLanes;
  for (int64_t v = 0; v < ocv; ++v)
    for (int64_t j0 = 0; j0 < nj; j0 += kLanes) {
      const int64_t cnt = std::min(kLanes, nj - j0);
      __m512 r[kLanes];
      for (int64_t j = 0; j < kLanes; ++j)
        r[j] = j < cnt ? _mm512_loadu_ps(tmp + (j0 + j) * width + v * kLanes) : _mm512_setzero_ps();
      transpose16(r);
      const auto mask = static_cast<__mmask16>((1u << cnt) - 1u);
      const int64_t chans = std::min(kLanes, n_ch - v * kLanes);
      for (int64_t c = 0; c < chans; ++c)
        _mm512_mask_storeu_ps(y + (v * kLanes + c) * plane + j0, mask, r[c]);
    }
}

// ---- backward-weight ----

// Positions per step: with OCV <= 2 a step takes JB positions, whose dy vectors stay in
// registers while each input of a kernel row is broadcast once for all the taps that read it
// (R * (JB + KW - 1) broadcasts per R * KW * JB * OCV FMAs). Wider channel blocks step by one.
constexpr int jb_for(int ocv) {
  return ocv == 1 ? 4 : ocv == 2 ? 2 : 1;
}

// Kernel rows per tile: R * KW * OCV accumulators + JB * OCV dy vectors + 1 within 31.
constexpr int rmax(int ocv, int kw) {
  return std::max(1, std::min(8, (31 - 1 - jb_for(ocv) * ocv) / (ocv * kw)));
}

struct WeightArgs {
  const float* xs;
  const float* dyt;
  int64_t count, plane, sample, wp, oh, ow, cpad;
  int64_t top, rows;  // data rows of the padded planes (Geometry)
};

// out[(r*KW + c)*cpad + 16v + lane] = sum over samples and positions, for kernel rows at
// row_off[r] (ci*plane + kh*Wp) and channels dyt[.][16v + lane] (dyt already offset).
// A row's last step may run past OW: its extra dy vectors are zero, and the inputs it reads
// (the next row, or the buffer's zero slack) are finite, so they add nothing.
template <int OCV, int KW, int R>
void weight_tile(const WeightArgs& a, const int64_t* row_off, const int64_t* kh_of, float* out) {
  constexpr int JB = jb_for(OCV);
  __m512 acc[R][KW][OCV];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < KW; ++c)
      for (int v = 0; v < OCV; ++v) acc[r][c][v] = _mm512_setzero_ps();
  for (int64_t s = 0; s < a.count; ++s) {
    const float* xs = a.xs + s * a.sample;
    const float* d = a.dyt + s * a.oh * a.ow * a.cpad;
    for (int64_t i = 0; i < a.oh; ++i) {
      const float* rows[R];
      bool data[R];  // kernel row r reads a data row (else only zero padding: skipped)
      for (int r = 0; r < R; ++r) {
        rows[r] = xs + row_off[r] + i * a.wp;
        data[r] = i + kh_of[r] >= a.top && i + kh_of[r] < a.top + a.rows;
      }
      for (int64_t j0 = 0; j0 < a.ow; j0 += JB, d += JB * a.cpad) {
        const int64_t valid = std::min<int64_t>(JB, a.ow - j0);
        __m512 dv[JB][OCV];
        for (int j = 0; j < JB; ++j)
          for (int v = 0; v < OCV; ++v)
            dv[j][v] =
                j < valid ? _mm512_loadu_ps(d + j * a.cpad + v * kLanes) : _mm512_setzero_ps();
        for (int r = 0; r < R; ++r) {
          if (!data[r]) continue;
          const float* x = rows[r] + j0;
#pragma GCC unroll 16
          for (int col = 0; col < JB + KW - 1; ++col) {
            const __m512 xb = _mm512_set1_ps(x[col]);
#pragma GCC unroll 8
            for (int c = 0; c < KW; ++c) {
              const int j = col - c;
              if (j < 0 || j >= JB) continue;
              for (int v = 0; v < OCV; ++v)
                acc[r][c][v] = _mm512_fmadd_ps(dv[j][v], xb, acc[r][c][v]);
            }
          }
        }
      }
      d -= (ceil_div(a.ow, JB) * JB - a.ow) * a.cpad;  // back to the next row's first position
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < KW; ++c)
      for (int v = 0; v < OCV; ++v)
        _mm512_storeu_ps(out + (r * KW + c) * a.cpad + v * kLanes, acc[r][c][v]);
}

using WeightTile = void (*)(const WeightArgs&, const int64_t*, const int64_t*, float*);

template <int OCV, int KW, int R = 1>
WeightTile pick_weight_tile(int r) {
  if constexpr (R > rmax(OCV, KW)) {
    return nullptr;
  } else {
    return r == R ? weight_tile<OCV, KW, R> : pick_weight_tile<OCV, KW, R + 1>(r);
  }
}

template <int KW>
WeightTile pick_weight_tile(int ocv, int r) {
  switch (ocv) {
    case 1:
      return pick_weight_tile<1, KW>(r);
    case 2:
      return pick_weight_tile<2, KW>(r);
    case 3:
      return pick_weight_tile<3, KW>(r);
    default:
      return pick_weight_tile<4, KW>(r);
  }
}

}  // namespace

void channel_vector_conv_sample(const float* xp, const Geometry& g, const float* wcv,
                                const float* bias, float* y) {
  const int64_t oh = g.oh(), ow = g.ow(), k_len = g.k(), out_plane = oh * ow;
  Blocks vb(ceil_div(g.c_out, kLanes), kChannelVectorsPerTile);
  alignas(64) float tmp[kMaxNJ * kLanes * kChannelVectorsPerTile];
  for (int64_t b = 0; b < vb.nb; ++b) {
    const int64_t v0 = vb.start(b), ocv = vb.size(b);
    const float* wb = wcv + kLanes * v0 * k_len;
    const float* bb = bias ? bias + kLanes * v0 : nullptr;
    const int64_t n_ch = std::min(ocv * kLanes, g.c_out - kLanes * v0);
    // Kernel widths 3 and 5 take the register-blocked tile.
    const bool kw3 = g.kw == 3, kw5 = g.kw == 5;
    const int64_t max_nj = kw3   ? kw_max_nj(static_cast<int>(ocv), 3)
                           : kw5 ? kw_max_nj(static_cast<int>(ocv), 5)
                                 : (ocv == 1 ? kMaxNJ1 : kMaxNJ2);
    Blocks jb(ow, max_nj);
    for (int64_t i = 0; i < oh; ++i) {
      int64_t kh_lo, kh_hi;
      g.kernel_rows(i, &kh_lo, &kh_hi);
      for (int64_t e = 0; e < jb.nb; ++e) {
        const int64_t j0 = jb.start(e), nj = jb.size(e);
        ForwardTile tile = ocv == 1 ? (kw3   ? kForward1K3[nj - 1]
                                       : kw5 ? kForward1K5[nj - 1]
                                             : kForward1[nj - 1])
                                    : (kw3   ? kForward2K3[nj - 1]
                                       : kw5 ? kForward2K5[nj - 1]
                                             : kForward2[nj - 1]);
        tile(xp + i * g.wp + j0, g, kh_lo, kh_hi, wb, bb, tmp);
        store_transposed(tmp, ocv, nj, n_ch, y + kLanes * v0 * out_plane + i * ow + j0, out_plane);
      }
    }
  }
}

bool channel_vector_weight_supported(int64_t kw) {
  return kw == 3 || kw == 5;
}

void channel_vector_weight_chunk(const float* xs, const float* dyt, int64_t count,
                                 const Geometry& g, float* part) {
  const int64_t cpad = round16(g.c_out), plane = g.plane(), rows = g.c_in * g.kh;
  Blocks vb(cpad / kLanes, 4);
  for (int64_t b = 0; b < vb.nb; ++b) {
    const int ocv = static_cast<int>(vb.size(b));
    const int64_t v0 = vb.start(b);
    WeightArgs a{
        xs,    dyt + v0 * kLanes, count, plane, g.c_in * plane, g.wp, g.oh(), g.ow(), cpad, g.top,
        g.rows};
    Blocks rb(rows, g.kw == 3 ? rmax(ocv, 3) : rmax(ocv, 5));
    for (int64_t e = 0; e < rb.nb; ++e) {
      const int64_t r0 = rb.start(e);
      const int r = static_cast<int>(rb.size(e));
      int64_t row_off[8], kh_of[8];
      for (int i = 0; i < r; ++i) {
        kh_of[i] = (r0 + i) % g.kh;
        row_off[i] = (r0 + i) / g.kh * plane + kh_of[i] * g.wp;
      }
      WeightTile tile = g.kw == 3 ? pick_weight_tile<3>(ocv, r) : pick_weight_tile<5>(ocv, r);
      tile(a, row_off, kh_of, part + r0 * g.kw * cpad + v0 * kLanes);
    }
  }
}

void channel_vector_transpose_dy(const float* dy, int64_t c_out, int64_t p, float* dyt,
                                 float* bias_acc) {
  const int64_t cpad = round16(c_out);
  for (int64_t v = 0; v < cpad / kLanes; ++v) {
    const int64_t chans = std::min(kLanes, c_out - v * kLanes);
    __m512 bsum = _mm512_loadu_ps(bias_acc + v * kLanes);
    for (int64_t p0 = 0; p0 < p; p0 += kLanes) {
      const int64_t cnt = std::min(kLanes, p - p0);
      // 16 channel rows are read side by side: fetch each two blocks ahead.
      for (int64_t c = 0; c < chans; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(dy + (v * kLanes + c) * p + p0 + 2 * kLanes),
                     _MM_HINT_T0);
      const auto mask = static_cast<__mmask16>((1u << cnt) - 1u);
      __m512 r[kLanes];
      for (int64_t c = 0; c < kLanes; ++c)
        r[c] = c < chans ? _mm512_maskz_loadu_ps(mask, dy + (v * kLanes + c) * p + p0)
                         : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t j = 0; j < cnt; ++j) {
        bsum = _mm512_add_ps(bsum, r[j]);
        _mm512_storeu_ps(dyt + (p0 + j) * cpad + v * kLanes, r[j]);
      }
    }
    _mm512_storeu_ps(bias_acc + v * kLanes, bsum);
  }
}

}  // namespace engine::kernels::cpu::detail

#endif  // __AVX512F__
