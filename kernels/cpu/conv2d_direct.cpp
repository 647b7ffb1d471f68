// kernels/cpu/conv2d_direct.cpp: the AVX-512 direct convolution (stride 1) behind conv2d.cpp.
//
// Forward: for one sample, the input is copied once into a zero-bordered plane xp (Cin, Hp, Wp).
// Output position q = oh*Wp + ow (a "padded-width" index) is then
//   y[co][q] = bias[co] + sum_{ci,kh,kw} w[co][ci][kh][kw] * xp[ci][q + kh*Wp + kw],
// a GEMM whose B matrix is xp read at shifted offsets: no im2col. A register tile holds 8 output
// channels x 48 consecutive q; columns with ow >= OW are computed and dropped by masked stores.
// Backward-data is the same kernel on dy padded by k-1-pad with the filter flipped and transposed.
// Backward-filter uses the same flat trick over a chunk of S samples laid out (C, S, Hp, Wp):
//   dw[co][ci][kh][kw] = sum_q dyc[co][q] * xc[ci][q + kh*Wp + kw],
// where dyc holds dy at rows < OH, columns < OW and zeros elsewhere. Each chunk writes its own
// partial, and the partials are summed in chunk order: the bits do not depend on the thread count.
#include "kernels/cpu/conv2d_direct.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace engine::kernels::cpu::detail {

#if defined(__AVX512F__)
namespace {

constexpr int64_t kLanes = 16;
constexpr int kNV = 3;                    // vectors per forward tile
constexpr int64_t kTile = kNV * kLanes;   // 48 output positions per forward tile
constexpr int kMR = 8;                    // output channels per forward tile
constexpr int kFMR = 4, kFNK = 6;         // backward-filter tile: 4 channels x 6 taps
constexpr int64_t kSlack = 64;            // zeros after a padded plane: tiles read past its end
constexpr int64_t kChunkFloats = 1 << 17; // backward-filter chunk budget (512 KiB, half of L2)

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// n items in nb even blocks: block b is [start(b), start(b+1)).
struct Blocks {
  int64_t n, nb;
  Blocks(int64_t n_, int64_t max_block) : n(n_), nb(ceil_div(n_, max_block)) {}
  int64_t start(int64_t b) const { return n * b / nb; }
  int64_t size(int64_t b) const { return start(b + 1) - start(b); }
};

// A stride-1 convolution over an already padded input: xp (Cin, Hp, Wp) -> y (Cout, OH, OW).
struct Geometry {
  int64_t c_in, hp, wp, c_out, kh, kw;
  int64_t oh() const { return hp - kh + 1; }
  int64_t ow() const { return wp - kw + 1; }
  int64_t plane() const { return hp * wp; }
  int64_t k() const { return c_in * kh * kw; }
};

// dst (Hp, Wp) = src (H, W) placed at row pt, column pl, zeros elsewhere.
void pad_plane(const float* src, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t hp,
               int64_t wp, float* dst) {
  std::memset(dst, 0, sizeof(float) * pt * wp);
  for (int64_t r = 0; r < h; ++r) {
    float* row = dst + (pt + r) * wp;
    std::memset(row, 0, sizeof(float) * pl);
    std::memcpy(row + pl, src + r * w, sizeof(float) * w);
    std::memset(row + pl + w, 0, sizeof(float) * (wp - pl - w));
  }
  std::memset(dst + (pt + h) * wp, 0, sizeof(float) * (hp - pt - h) * wp);
}

// Packs a filter for forward_tile: output channels in blocks of <= kMR, block [o0, o0+mr)
// stored at dst + o0*K as (K, mr). value(o, k) is the weight of output o and tap k.
template <class F>
void pack_weights(float* dst, int64_t n_out, int64_t k_len, F value) {
  Blocks bl(n_out, kMR);
  for (int64_t b = 0; b < bl.nb; ++b) {
    int64_t o0 = bl.start(b), mr = bl.size(b);
    float* d = dst + o0 * k_len;
    for (int64_t k = 0; k < k_len; ++k)
      for (int64_t r = 0; r < mr; ++r) d[k * mr + r] = value(o0 + r, k);
  }
}

// Where the lanes of each tile vector go: lanes under mask are stored at y + offset + lane.
struct Segment {
  __mmask16 mask;
  int64_t offset;
};
struct StoreMap {
  Segment seg[kNV][kLanes + 2];
  int count[kNV];
};

void build_store_map(int64_t q0, int64_t wp, int64_t oh, int64_t ow, StoreMap* m) {
  for (int v = 0; v < kNV; ++v) {
    m->count[v] = 0;
    int64_t q = q0 + v * kLanes;
    for (int64_t lane = 0; lane < kLanes;) {
      int64_t r = q / wp, c = q % wp;
      int64_t len = std::min(kLanes - lane, wp - c);
      if (r >= oh) break;
      int64_t valid = std::min(len, ow - c);
      if (valid > 0) {
        auto mask = static_cast<__mmask16>(((1u << valid) - 1u) << lane);
        m->seg[v][m->count[v]++] = {mask, r * ow + c - lane};
      }
      lane += len;
      q += len;
    }
  }
}

// y (MR, OH, OW) tile columns [q0, q0+48) for MR output channels; xq = xp + q0.
template <int MR>
void forward_tile(const float* xq, const Geometry& g, const float* w, const float* bias,
                  float* y, const StoreMap& m) {
  __m512 acc[MR][kNV];
  for (int r = 0; r < MR; ++r) {
    __m512 b = _mm512_set1_ps(bias ? bias[r] : 0.f);
    for (int v = 0; v < kNV; ++v) acc[r][v] = b;
  }
  const int64_t plane = g.plane(), wp = g.wp, kw = g.kw;
  const float* wk = w;
  for (int64_t ci = 0; ci < g.c_in; ++ci) {
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const float* row = xq + ci * plane + kh * wp;
      for (int64_t j = 0; j < kw; ++j, wk += MR) {
        __m512 x0 = _mm512_loadu_ps(row + j);
        __m512 x1 = _mm512_loadu_ps(row + j + 16);
        __m512 x2 = _mm512_loadu_ps(row + j + 32);
        for (int r = 0; r < MR; ++r) {
          __m512 wr = _mm512_set1_ps(wk[r]);
          acc[r][0] = _mm512_fmadd_ps(wr, x0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_ps(wr, x1, acc[r][1]);
          acc[r][2] = _mm512_fmadd_ps(wr, x2, acc[r][2]);
        }
      }
    }
  }
  const int64_t out_plane = g.oh() * g.ow();
  for (int r = 0; r < MR; ++r) {
    // Segment offsets may point before the plane; only the lanes under the mask are written.
    auto base = reinterpret_cast<intptr_t>(y + r * out_plane);
    for (int v = 0; v < kNV; ++v)
      for (int s = 0; s < m.count[v]; ++s) {
        const Segment& sg = m.seg[v][s];
        auto* dst = reinterpret_cast<float*>(base + sg.offset * intptr_t{sizeof(float)});
        _mm512_mask_storeu_ps(dst, sg.mask, acc[r][v]);
      }
  }
}

using ForwardTile = void (*)(const float*, const Geometry&, const float*, const float*, float*,
                             const StoreMap&);
constexpr ForwardTile kForwardTiles[kMR] = {forward_tile<1>, forward_tile<2>, forward_tile<3>,
                                            forward_tile<4>, forward_tile<5>, forward_tile<6>,
                                            forward_tile<7>, forward_tile<8>};

// One sample: y (Cout, OH, OW) from xp (Cin, Hp, Wp) followed by kSlack readable floats.
void conv_sample(const float* xp, const Geometry& g, const float* wpk, const float* bias,
                 float* y) {
  const int64_t oh = g.oh(), ow = g.ow(), k_len = g.k();
  const int64_t q_end = (oh - 1) * g.wp + ow;
  Blocks bl(g.c_out, kMR);
  StoreMap m;
  for (int64_t q0 = 0; q0 < q_end; q0 += kTile) {
    build_store_map(q0, g.wp, oh, ow, &m);
    for (int64_t b = 0; b < bl.nb; ++b) {
      int64_t o0 = bl.start(b);
      kForwardTiles[bl.size(b) - 1](xp + q0, g, wpk + o0 * k_len, bias ? bias + o0 : nullptr,
                                    y + o0 * oh * ow, m);
    }
  }
}

int64_t sample_buffer(const Geometry& g) { return round16(g.c_in * g.plane() + kSlack); }

// Runs conv_sample over n samples in parallel; in (N, Cin, H, W) is padded by (pt, pl) first.
void conv_batch(const float* in, int64_t n, int64_t h, int64_t w, int64_t pt, int64_t pl,
                const Geometry& g, const float* wpk, const float* bias, float* out,
                float* buffers) {
  const int64_t per = sample_buffer(g), in_sample = g.c_in * h * w;
  const int64_t out_sample = g.c_out * g.oh() * g.ow();
  parallel_run([&](int t, int nt) {
    float* xp = buffers + t * per;
    std::memset(xp + g.c_in * g.plane(), 0, sizeof(float) * (per - g.c_in * g.plane()));
    for (int64_t i = n * t / nt; i < n * (t + 1) / nt; ++i) {
      for (int64_t c = 0; c < g.c_in; ++c)
        pad_plane(in + i * in_sample + c * h * w, h, w, pt, pl, g.hp, g.wp, xp + c * g.plane());
      conv_sample(xp, g, wpk, bias, out + i * out_sample);
    }
  });
}

Geometry forward_geometry(const Conv2dShape& s) {
  return {s.c_in, s.h + 2 * s.pad, s.w + 2 * s.pad, s.c_out, s.kh, s.kw};
}
// dx = conv(dy padded by k-1-pad, flipped transposed filter): Cout in, Cin out.
Geometry data_geometry(const Conv2dShape& s) {
  return {s.c_out, s.oh() + 2 * (s.kh - 1 - s.pad), s.ow() + 2 * (s.kw - 1 - s.pad),
          s.c_in, s.kh, s.kw};
}

// ---- backward-filter ----

// Samples per chunk: a power of two whose (Cin + Cout) padded planes fit kChunkFloats.
int64_t filter_chunk(const Conv2dShape& s) {
  int64_t plane = (s.h + 2 * s.pad) * (s.w + 2 * s.pad);
  int64_t fit = std::max<int64_t>(1, kChunkFloats / ((s.c_in + s.c_out) * plane));
  int64_t c = 1;
  while (c * 2 <= std::min<int64_t>(fit, 16)) c *= 2;
  return c;
}

struct FilterLayout {
  int64_t chunk, n_chunks, q_pad, x_floats, dy_floats, per_thread;
};

FilterLayout filter_layout(const Conv2dShape& s) {
  Geometry g = forward_geometry(s);
  FilterLayout l;
  l.chunk = filter_chunk(s);
  l.n_chunks = ceil_div(s.n, l.chunk);
  l.q_pad = round16(l.chunk * g.plane());
  // Tap reads run (KH-1)*Wp + KW-1 floats past the last channel.
  l.x_floats = g.c_in * l.q_pad + round16((g.kh - 1) * g.wp + g.kw - 1 + kLanes);
  l.dy_floats = g.c_out * l.q_pad;
  l.per_thread = l.x_floats + l.dy_floats;
  return l;
}

// Sum of the 16 lanes in a fixed tree (GCC 12's shuffle intrinsics warn -Wuninitialized).
float lane_sum(__m512 v) {
  alignas(64) float t[kLanes];
  _mm512_store_ps(t, v);
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) t[l] += t[l + w];
  return t[0];
}

// out[r*K + j] = sum_q dyc[r][q] * xc[off[j] + q] for q < q_len (a multiple of 16).
template <int MR, int NK>
void filter_tile(const float* dyc, const float* xc, int64_t q_pad, int64_t q_len,
                 const int64_t* off, float* out, int64_t k_len) {
  __m512 acc[MR][NK];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NK; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t q = 0; q < q_len; q += kLanes) {
    __m512 d[MR];
    for (int r = 0; r < MR; ++r) d[r] = _mm512_loadu_ps(dyc + r * q_pad + q);
    for (int j = 0; j < NK; ++j) {
      __m512 xv = _mm512_loadu_ps(xc + off[j] + q);
      // Keeps xv in a register: GCC would otherwise fold the load into each of the MR FMAs.
      asm("" : "+v"(xv));
      for (int r = 0; r < MR; ++r) acc[r][j] = _mm512_fmadd_ps(d[r], xv, acc[r][j]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NK; ++j) out[r * k_len + j] = lane_sum(acc[r][j]);
}

using FilterTile = void (*)(const float*, const float*, int64_t, int64_t, const int64_t*, float*,
                            int64_t);
#define ENGINE_FILTER_ROW(MR)                                                          \
  {filter_tile<MR, 1>, filter_tile<MR, 2>, filter_tile<MR, 3>, filter_tile<MR, 4>, \
   filter_tile<MR, 5>, filter_tile<MR, 6>}
constexpr FilterTile kFilterTiles[kFMR][kFNK] = {ENGINE_FILTER_ROW(1), ENGINE_FILTER_ROW(2),
                                                 ENGINE_FILTER_ROW(3), ENGINE_FILTER_ROW(4)};
#undef ENGINE_FILTER_ROW

// Fills xc (Cin, S, Hp, Wp) and dyc (Cout, S, Hp, Wp) for samples [n0, n0+count).
void fill_chunk(const float* x, const float* dy, const Conv2dShape& s, const FilterLayout& l,
                int64_t n0, int64_t count, float* xc, float* dyc) {
  Geometry g = forward_geometry(s);
  const int64_t plane = g.plane(), oh = s.oh(), ow = s.ow(), used = count * plane;
  for (int64_t c = 0; c < s.c_in; ++c) {
    float* dst = xc + c * l.q_pad;
    for (int64_t j = 0; j < count; ++j)
      pad_plane(x + ((n0 + j) * s.c_in + c) * s.h * s.w, s.h, s.w, s.pad, s.pad, g.hp, g.wp,
                dst + j * plane);
    std::memset(dst + used, 0, sizeof(float) * (l.q_pad - used));
  }
  std::memset(xc + s.c_in * l.q_pad, 0, sizeof(float) * (l.x_floats - s.c_in * l.q_pad));
  for (int64_t c = 0; c < s.c_out; ++c) {
    float* dst = dyc + c * l.q_pad;
    for (int64_t j = 0; j < count; ++j)
      pad_plane(dy + ((n0 + j) * s.c_out + c) * oh * ow, oh, ow, 0, 0, g.hp, g.wp,
                dst + j * plane);
    std::memset(dst + used, 0, sizeof(float) * (l.q_pad - used));
  }
}

// part (Cout, K) = this chunk's dw.
void filter_chunk_partial(const float* xc, const float* dyc, const Conv2dShape& s,
                          const FilterLayout& l, int64_t q_len, float* part) {
  const int64_t k_len = s.k(), wp = s.w + 2 * s.pad;
  Blocks co(s.c_out, kFMR), kb(k_len, kFNK);
  for (int64_t b = 0; b < co.nb; ++b) {
    const int64_t o0 = co.start(b);
    for (int64_t e = 0; e < kb.nb; ++e) {
      int64_t off[kFNK];
      const int64_t k0 = kb.start(e), nk = kb.size(e);
      for (int64_t j = 0; j < nk; ++j) {
        int64_t k = k0 + j, ci = k / (s.kh * s.kw), kh = (k / s.kw) % s.kh, kw = k % s.kw;
        off[j] = ci * l.q_pad + kh * wp + kw;
      }
      kFilterTiles[co.size(b) - 1][nk - 1](dyc + o0 * l.q_pad, xc, l.q_pad, q_len, off,
                                           part + o0 * k_len + k0, k_len);
    }
  }
}

}  // namespace

bool direct_supported(const Conv2dShape& s) {
  return s.stride == 1 && s.pad <= s.kh - 1 && s.pad <= s.kw - 1 && s.oh() > 0 && s.ow() > 0;
}

int64_t direct_forward_ws(const Conv2dShape& s, int nthreads) {
  return round16(s.w_count()) + nthreads * sample_buffer(forward_geometry(s));
}

int64_t direct_backward_data_ws(const Conv2dShape& s, int nthreads) {
  return round16(s.w_count()) + nthreads * sample_buffer(data_geometry(s));
}

int64_t direct_backward_filter_ws(const Conv2dShape& s, int nthreads) {
  FilterLayout l = filter_layout(s);
  return l.n_chunks * s.w_count() + nthreads * l.per_thread;
}

void direct_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, float* ws) {
  Geometry g = forward_geometry(s);
  const int64_t k_len = s.k();
  pack_weights(ws, s.c_out, k_len, [&](int64_t o, int64_t k) { return w[o * k_len + k]; });
  conv_batch(x, s.n, s.h, s.w, s.pad, s.pad, g, ws, b, y, ws + round16(s.w_count()));
}

void direct_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          float* ws) {
  Geometry g = data_geometry(s);
  const int64_t khw = s.kh * s.kw;
  // Transposed conv filter: output ci, tap (co, kh, kw) = w[co][ci][KH-1-kh][KW-1-kw].
  pack_weights(ws, s.c_in, s.c_out * khw, [&](int64_t ci, int64_t k) {
    int64_t co = k / khw, r = k % khw;
    return w[(co * s.c_in + ci) * khw + (khw - 1 - r)];
  });
  conv_batch(dy, s.n, s.oh(), s.ow(), s.kh - 1 - s.pad, s.kw - 1 - s.pad, g, ws, nullptr, dx,
             ws + round16(s.w_count()));
}

void direct_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            float beta, float* ws) {
  FilterLayout l = filter_layout(s);
  const int64_t wc = s.w_count(), plane = (s.h + 2 * s.pad) * (s.w + 2 * s.pad);
  float* parts = ws;
  float* buffers = ws + l.n_chunks * wc;
  parallel_run([&](int t, int nt) {
    float* xc = buffers + t * l.per_thread;
    float* dyc = xc + l.x_floats;
    for (int64_t c = l.n_chunks * t / nt; c < l.n_chunks * (t + 1) / nt; ++c) {
      int64_t n0 = c * l.chunk, count = std::min(l.chunk, s.n - n0);
      fill_chunk(x, dy, s, l, n0, count, xc, dyc);
      filter_chunk_partial(xc, dyc, s, l, round16(count * plane), parts + c * wc);
    }
  });
  // Fixed order over chunks, whatever the thread count.
  parallel_for(wc, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float acc = parts[i];
      for (int64_t c = 1; c < l.n_chunks; ++c) acc += parts[c * wc + i];
      dw[i] = beta == 0.f ? acc : beta * dw[i] + acc;
    }
  });
}

#else  // no AVX-512: conv2d.cpp takes the im2col + GEMM path.

bool direct_supported(const Conv2dShape&) { return false; }
int64_t direct_forward_ws(const Conv2dShape&, int) { return 0; }
int64_t direct_backward_data_ws(const Conv2dShape&, int) { return 0; }
int64_t direct_backward_filter_ws(const Conv2dShape&, int) { return 0; }
void direct_forward(const float*, const float*, const float*, float*, const Conv2dShape&,
                    float*) {
  ENGINE_FAIL("conv2d: direct path not compiled (no AVX-512)");
}
void direct_backward_data(const float*, const float*, float*, const Conv2dShape&, float*) {
  ENGINE_FAIL("conv2d: direct path not compiled (no AVX-512)");
}
void direct_backward_filter(const float*, const float*, float*, const Conv2dShape&, float,
                            float*) {
  ENGINE_FAIL("conv2d: direct path not compiled (no AVX-512)");
}

#endif

}  // namespace engine::kernels::cpu::detail
