// kernels/cpu/conv2d/direct_simd.h: internal to the direct kernels of kernels/cpu/conv2d/: AVX-512
// helpers and the stride-1 direct kernels. "Flat" vectorises over output positions of a
// padded-width plane (direct_flat.cpp); "channel-vector" (cv) vectorises over 16 output channels
// and broadcasts inputs (direct_channel_vector.cpp). direct.cpp picks one per shape and runs the
// batch loops; a one-channel input's forward has its own kernel (direct_one_channel.cpp).
#pragma once
#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>

#include "kernels/conv2d.h"
#include "kernels/pool.h"

namespace engine::kernels::cpu::detail {

constexpr int64_t kLanes = 16;
constexpr int64_t kSlack = 64;  // readable zeros after a padded buffer: tiles read past its end

inline int64_t round16(int64_t n) {
  return (n + 15) / 16 * 16;
}
inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// n items in nb even blocks of at most max_block: block b is [start(b), start(b+1)).
struct Blocks {
  int64_t n, nb;
  Blocks(int64_t n_, int64_t max_block) : n(n_), nb(ceil_div(n_, max_block)) {}
  int64_t start(int64_t b) const { return n * b / nb; }
  int64_t size(int64_t b) const { return start(b + 1) - start(b); }
};

// A stride-1 convolution over an already padded input: xp (Cin, Hp, Wp) -> y (Cout, OH, OW).
// Rows [top, top + rows) of each padded plane hold data, the others are zero padding, which
// the channel-vector kernels skip (kernel rows that would only multiply zeros).
struct Geometry {
  int64_t c_in, hp, wp, c_out, kh, kw;
  int64_t top, rows;
  int64_t oh() const { return hp - kh + 1; }
  int64_t ow() const { return wp - kw + 1; }
  int64_t plane() const { return hp * wp; }
  int64_t k() const { return c_in * kh * kw; }
  // Kernel rows [*lo, *hi) read data rows for output row i.
  void kernel_rows(int64_t i, int64_t* lo, int64_t* hi) const {
    *lo = top - i > 0 ? top - i : 0;
    *hi = top + rows - i < kh ? top + rows - i : kh;
  }
};

// dst (Hp, Wp) = src (H, W) placed at row pt, column pl, zeros elsewhere.
void pad_plane(const float* src, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t hp,
               int64_t wp, float* dst);

// vpermt2ps indices of the 4 rounds of transpose16 (distance d = 8, 4, 2, 1): rows j and j+d
// swap their off-diagonal d x d blocks. lo takes lane l from (l / 2d)*2d + l % 2d of
// (r[j], r[j+d]) laid end to end; hi takes the other half.
struct TransposeIdx {
  alignas(64) int32_t lo[4][kLanes];
  alignas(64) int32_t hi[4][kLanes];
  constexpr TransposeIdx() : lo{}, hi{} {
    for (int s = 0, d = 8; s < 4; ++s, d /= 2)
      for (int l = 0; l < kLanes; ++l) {
        int block = l / (2 * d) * (2 * d), within = l % (2 * d);
        lo[s][l] = within < d ? block + within : 16 + block + within - d;
        hi[s][l] = within < d ? block + d + within : 16 + block + within;
      }
  }
};
inline constexpr TransposeIdx kTransposeIdx{};

template <int S, int D>
[[gnu::always_inline]] inline void transpose_round(__m512 (&r)[kLanes]) {
  const __m512i lo = _mm512_load_si512(kTransposeIdx.lo[S]);
  const __m512i hi = _mm512_load_si512(kTransposeIdx.hi[S]);
#pragma GCC unroll 16
  for (int j = 0; j < kLanes; ++j) {
    if ((j / D) % 2) continue;
    __m512 a = r[j], b = r[j + D];
    r[j] = _mm512_permutex2var_ps(a, lo, b);
    r[j + D] = _mm512_permutex2var_ps(a, hi, b);
  }
}

// r[j] lane c -> r[c] lane j: a 16 x 16 transpose in registers (4 rounds of vpermt2ps).
[[gnu::always_inline]] inline void transpose16(__m512 (&r)[kLanes]) {
  transpose_round<0, 8>(r);
  transpose_round<1, 4>(r);
  transpose_round<2, 2>(r);
  transpose_round<3, 1>(r);
}

// ---- flat kernel: direct_flat.cpp ----

constexpr int64_t kFlatMR = 8;  // output channels per tile

// Filter packing for flat_conv_sample: outputs in blocks of <= kFlatMR, block [o0, o0+mr)
// stored at dst + o0*K as (K, mr). value(o, k) is the weight of output o and tap k.
template <class F>
void flat_pack(float* dst, int64_t n_out, int64_t k_len, F value) {
  Blocks bl(n_out, kFlatMR);
  for (int64_t b = 0; b < bl.nb; ++b) {
    int64_t o0 = bl.start(b), mr = bl.size(b);
    for (int64_t k = 0; k < k_len; ++k)
      for (int64_t r = 0; r < mr; ++r) dst[o0 * k_len + k * mr + r] = value(o0 + r, k);
  }
}

// y (Cout, OH, OW) of one sample from xp (Cin, Hp, Wp) followed by kSlack readable floats.
void flat_conv_sample(const float* xp, const Geometry& g, const float* wpk, const float* bias,
                      float* y);

// Backward-weight over one chunk in the flat layout: xc (Cin, q_pad) holding S padded planes
// back to back (+ slack), dyc (Cout, q_pad) holding dy at rows < OH, cols < OW of each plane and
// zeros elsewhere. part (Cout, K) = sum_q dyc[co][q] * xc[ci][q + kh*Wp + kw] over q < q_len.
void flat_weight_chunk(const float* xc, const float* dyc, const Geometry& g, int64_t q_pad,
                       int64_t q_len, float* part);

// ---- channel-vector kernel: direct_channel_vector.cpp ----

// Output channels padded to vectors of 16; blocks of <= kChannelVectorsPerTile vectors share a
// tile.
constexpr int64_t kChannelVectorsPerTile = 2;

// Filter packing for channel_vector_conv_sample: vector block [v0, v0+nv) stored at dst + 16*v0*K
// as (K, 16*nv), channels >= n_out zero. value(o, k) as for flat_pack.
template <class F>
void channel_vector_pack(float* dst, int64_t n_out, int64_t k_len, F value) {
  Blocks vb(ceil_div(n_out, kLanes), kChannelVectorsPerTile);
  for (int64_t b = 0; b < vb.nb; ++b) {
    const int64_t v0 = vb.start(b), width = kLanes * vb.size(b);
    float* d = dst + kLanes * v0 * k_len;
    for (int64_t k = 0; k < k_len; ++k)
      for (int64_t c = 0; c < width; ++c) {
        int64_t o = kLanes * v0 + c;
        d[k * width + c] = o < n_out ? value(o, k) : 0.f;
      }
  }
}

// As flat_conv_sample; bias (if not null) padded to a multiple of 16 floats.
void channel_vector_conv_sample(const float* xp, const Geometry& g, const float* wcv,
                                const float* bias, float* y);

// Whether channel_vector_weight_chunk handles this kernel width.
bool channel_vector_weight_supported(int64_t kw);

// Backward-weight over one chunk in the channel-vector layout: xs (count, Cin, Hp, Wp) padded
// samples back to back (+ slack), dyt (count, OH*OW, cpad) dy transposed, cpad = round16(Cout).
// part (K, cpad): part[k][co] = sum over samples and positions of dy * x at tap k.
void channel_vector_weight_chunk(const float* xs, const float* dyt, int64_t count,
                                 const Geometry& g, float* part);

// dyt (OH*OW, cpad) = dy (Cout, OH*OW) transposed, channels >= Cout zero; adds each channel's
// sum to bias_acc (cpad), in a fixed order.
void channel_vector_transpose_dy(const float* dy, int64_t c_out, int64_t p, float* dyt,
                                 float* bias_acc);

// ---- one-input-channel forward: direct_one_channel.cpp ----

// Cin 1, stride 1, pad <= k-1 and KW <= 16.
bool one_channel_supported(const Conv2dShape& s);

// y (N, Cout, OH, OW) = conv(x (N, 1, H, W), w (Cout, 1, KH, KW)) + b (Cout, may be null); no
// workspace, samples and channel blocks split over the pool.
void one_channel_forward(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s);

// y, arg (N, Cout, PH, PW) = max_pool2d (relu: relu of it) of one_channel_forward's output, pooled
// by the task that computed it while it is in cache: the convolution's output is never written.
void one_channel_forward_pool(const float* x, const float* w, const float* b, float* y,
                              int32_t* arg, const Conv2dShape& s, const Pool2dShape& ps, bool relu);

}  // namespace engine::kernels::cpu::detail

#endif  // __AVX512F__
