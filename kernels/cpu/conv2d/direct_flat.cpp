// kernels/cpu/conv2d/direct_flat.cpp: the "flat" stride-1 direct convolution kernels (AVX-512).
//
// Forward, for one sample: output position q = oh*Wp + ow of the padded-width plane is
//   y[co][q] = bias[co] + sum_{ci,kh,kw} w[co][ci][kh][kw] * xp[ci][q + kh*Wp + kw],
// a GEMM whose B matrix is the padded input read at shifted offsets: no im2col. A register tile
// holds 8 output channels x 48 consecutive q; columns with ow >= OW are computed and dropped by
// masked stores, so the waste is (Wp - OW) / Wp.
// Backward-weight, over a chunk of S samples laid out (C, S, Hp, Wp):
//   dw[co][ci][kh][kw] = sum_q dyc[co][q] * xc[ci][q + kh*Wp + kw],
// with dyc = dy at rows < OH, cols < OW and zeros elsewhere; tiles of 4 channels x 6 taps.
#include <algorithm>

#include "kernels/cpu/conv2d/direct_simd.h"

#if defined(__AVX512F__)

namespace engine::kernels::cpu::detail {
namespace {

constexpr int kMaxNV = 3;  // vectors per forward tile (48 positions)
constexpr int kFMR = 4, kFNK = 6;

// Where the lanes of each tile vector go: lanes under mask are stored at y + offset + lane.
struct Segment {
  __mmask16 mask;
  int64_t offset;
};
struct StoreMap {
  Segment seg[kMaxNV][kLanes + 2];
  int count[kMaxNV];
};

void build_store_map(int64_t q0, int nv, int64_t wp, int64_t oh, int64_t ow, StoreMap* m) {
  for (int v = 0; v < nv; ++v) {
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

// y (MR, OH, OW): tile columns [q0, q0 + 16*NV) for MR output channels; xq = xp + q0.
template <int MR, int NV>
void forward_tile(const float* xq, const Geometry& g, const float* w, const float* bias, float* y,
                  const StoreMap& m) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    __m512 b = _mm512_set1_ps(bias ? bias[r] : 0.f);
    for (int v = 0; v < NV; ++v) acc[r][v] = b;
  }
  const int64_t plane = g.plane(), wp = g.wp, kw = g.kw;
  const float* wk = w;
  for (int64_t ci = 0; ci < g.c_in; ++ci) {
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const float* row = xq + ci * plane + kh * wp;
      for (int64_t j = 0; j < kw; ++j, wk += MR) {
        __m512 x[NV];
        for (int v = 0; v < NV; ++v) x[v] = _mm512_loadu_ps(row + j + v * kLanes);
        for (int r = 0; r < MR; ++r) {
          __m512 wr = _mm512_set1_ps(wk[r]);
          for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(wr, x[v], acc[r][v]);
        }
      }
    }
  }
  const int64_t out_plane = g.oh() * g.ow();
  for (int r = 0; r < MR; ++r) {
    // Segment offsets may point before the plane; only the lanes under the mask are written.
    auto base = reinterpret_cast<intptr_t>(y + r * out_plane);
    for (int v = 0; v < NV; ++v)
      for (int s = 0; s < m.count[v]; ++s) {
        const Segment& sg = m.seg[v][s];
        auto* dst = reinterpret_cast<float*>(base + sg.offset * intptr_t{sizeof(float)});
        _mm512_mask_storeu_ps(dst, sg.mask, acc[r][v]);
      }
  }
}

using ForwardTile = void (*)(const float*, const Geometry&, const float*, const float*, float*,
                             const StoreMap&);
#define ENGINE_FLAT_ROW(NV)                                                                \
  {                                                                                        \
    forward_tile<1, NV>, forward_tile<2, NV>, forward_tile<3, NV>, forward_tile<4, NV>,    \
        forward_tile<5, NV>, forward_tile<6, NV>, forward_tile<7, NV>, forward_tile<8, NV> \
  }
constexpr ForwardTile kForwardTiles[kMaxNV][kFlatMR] = {ENGINE_FLAT_ROW(1), ENGINE_FLAT_ROW(2),
                                                        ENGINE_FLAT_ROW(3)};
#undef ENGINE_FLAT_ROW

// out[r*K + j] = sum_q dyc[r][q] * xc[off[j] + q] for q < q_len (a multiple of 16).
template <int MR, int NK>
void weight_tile(const float* dyc, const float* xc, int64_t q_pad, int64_t q_len,
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
    for (int j = 0; j < NK; ++j) {
      alignas(64) float t[kLanes];  // lanes summed in a fixed tree
      _mm512_store_ps(t, acc[r][j]);
      for (int64_t w = kLanes / 2; w > 0; w /= 2)
        for (int64_t l = 0; l < w; ++l) t[l] += t[l + w];
      out[r * k_len + j] = t[0];
    }
}

using WeightTile = void (*)(const float*, const float*, int64_t, int64_t, const int64_t*, float*,
                            int64_t);
#define ENGINE_WEIGHT_ROW(MR)                                                       \
  {                                                                                 \
    weight_tile<MR, 1>, weight_tile<MR, 2>, weight_tile<MR, 3>, weight_tile<MR, 4>, \
        weight_tile<MR, 5>, weight_tile<MR, 6>                                      \
  }
constexpr WeightTile kWeightTiles[kFMR][kFNK] = {ENGINE_WEIGHT_ROW(1), ENGINE_WEIGHT_ROW(2),
                                                 ENGINE_WEIGHT_ROW(3), ENGINE_WEIGHT_ROW(4)};
#undef ENGINE_WEIGHT_ROW

}  // namespace

void flat_conv_sample(const float* xp, const Geometry& g, const float* wpk, const float* bias,
                      float* y) {
  const int64_t oh = g.oh(), ow = g.ow(), k_len = g.k();
  const int64_t q_end = (oh - 1) * g.wp + ow;
  Blocks bl(g.c_out, kFlatMR);
  StoreMap m;
  for (int64_t q0 = 0; q0 < q_end; q0 += kMaxNV * kLanes) {
    const int nv = static_cast<int>(std::min<int64_t>(kMaxNV, ceil_div(q_end - q0, kLanes)));
    build_store_map(q0, nv, g.wp, oh, ow, &m);
    for (int64_t b = 0; b < bl.nb; ++b) {
      int64_t o0 = bl.start(b);
      kForwardTiles[nv - 1][bl.size(b) - 1](xp + q0, g, wpk + o0 * k_len,
                                            bias ? bias + o0 : nullptr, y + o0 * oh * ow, m);
    }
  }
}

void flat_weight_chunk(const float* xc, const float* dyc, const Geometry& g, int64_t q_pad,
                       int64_t q_len, float* part) {
  const int64_t k_len = g.k(), khw = g.kh * g.kw;
  Blocks co(g.c_out, kFMR), kb(k_len, kFNK);
  for (int64_t b = 0; b < co.nb; ++b) {
    const int64_t o0 = co.start(b);
    for (int64_t e = 0; e < kb.nb; ++e) {
      int64_t off[kFNK];
      const int64_t k0 = kb.start(e), nk = kb.size(e);
      for (int64_t j = 0; j < nk; ++j) {
        int64_t k = k0 + j, ci = k / khw, kh = (k % khw) / g.kw, kw = k % g.kw;
        off[j] = ci * q_pad + kh * g.wp + kw;
      }
      kWeightTiles[co.size(b) - 1][nk - 1](dyc + o0 * q_pad, xc, q_pad, q_len, off,
                                           part + o0 * k_len + k0, k_len);
    }
  }
}

}  // namespace engine::kernels::cpu::detail

#endif  // __AVX512F__
