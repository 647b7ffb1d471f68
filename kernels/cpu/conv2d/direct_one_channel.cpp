// kernels/cpu/conv2d/direct_one_channel.cpp: the stride-1 forward convolution of a one-channel
// input (a model's first layer) (AVX-512).
//
// With Cin = 1 the reduction is only KH*KW taps (9 or 25), too short for the flat and cv kernels'
// tiles: their padding, packing and segment stores cost more than the FMAs. Here a register tile
// holds MR output channels x (16*NV) consecutive columns of one output row:
//   y[co][i][j] = bias[co] + sum_{kh,kw} w[co][kh][kw] * x[i + kh - pad][j + kw - pad],
// each tap one masked load of the unpadded input row (lanes outside the row, the padding, read
// as zero) and MR broadcast FMAs per vector; input rows outside the plane are skipped. Tasks are
// (sample, channel block) pairs, each output written by exactly one task: the bits do not depend
// on the thread count.
#include <algorithm>

#include "core/thread_pool.h"
#include "kernels/cpu/conv2d/direct_simd.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/scratch.h"

#if defined(__AVX512F__)

namespace engine::kernels::cpu::detail {
namespace {

constexpr int kOneChannelMaxNV = 3;   // vectors per tile row (48 columns)
constexpr int kOneChannelMaxMR = 12;  // output channels per tile (NV <= 2; 8 at NV 3)
constexpr int64_t kOneChannelMaxKw = 16;

// Load masks of one column tile: lanes l of vector v at tap column kw read x column
// c0 + 16v + kw - pad + l when it lies in [0, W), zero otherwise.
struct TileMasks {
  __mmask16 load[kOneChannelMaxKw][kOneChannelMaxNV];
  __mmask16 store[kOneChannelMaxNV];
};

__mmask16 lane_range(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, kLanes);
  return lo < hi ? static_cast<__mmask16>(((1u << (hi - lo)) - 1u) << lo) : 0;
}

TileMasks tile_masks(const Conv2dShape& s, int64_t c0, int nv) {
  TileMasks m{};
  for (int v = 0; v < nv; ++v) {
    const int64_t c = c0 + v * kLanes;
    m.store[v] = lane_range(0, s.ow() - c);
    for (int64_t kw = 0; kw < s.kw; ++kw) {
      const int64_t first = c + kw - s.pad;  // x column read by lane 0
      m.load[kw][v] = lane_range(-first, s.w - first);
    }
  }
  return m;
}

// y (MR, OH, OW) columns [c0, c0 + 16*NV) of one sample x (H, W); w (MR, KH, KW).
template <int MR, int NV>
void one_channel_tile(const float* x, const Conv2dShape& s, int64_t c0, const TileMasks& m,
                      const float* w, const float* bias, float* y) {
  const int64_t oh = s.oh(), ow = s.ow(), khw = s.kh * s.kw, plane = oh * ow;
  // Masked loads may start before x; only the lanes under the mask are read.
  const auto base = reinterpret_cast<intptr_t>(x) + (c0 - s.pad) * intptr_t{sizeof(float)};
  for (int64_t i = 0; i < oh; ++i) {
    __m512 acc[MR][NV];
    for (int r = 0; r < MR; ++r) {
      const __m512 b = _mm512_set1_ps(bias ? bias[r] : 0.f);
      for (int v = 0; v < NV; ++v) acc[r][v] = b;
    }
    const int64_t kh_lo = std::max<int64_t>(0, s.pad - i);
    const int64_t kh_hi = std::min<int64_t>(s.kh, s.h + s.pad - i);
    for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
      const intptr_t row = base + (i + kh - s.pad) * s.w * intptr_t{sizeof(float)};
      for (int64_t kw = 0; kw < s.kw; ++kw) {
        const float* wt = w + kh * s.kw + kw;
        __m512 xv[NV];
        for (int v = 0; v < NV; ++v)
          xv[v] = _mm512_maskz_loadu_ps(
              m.load[kw][v],
              reinterpret_cast<const float*>(row + (v * kLanes + kw) * intptr_t{sizeof(float)}));
        for (int r = 0; r < MR; ++r) {
          const __m512 wr = _mm512_set1_ps(wt[r * khw]);
          for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(wr, xv[v], acc[r][v]);
        }
      }
    }
    float* yi = y + i * ow + c0;
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v)
        _mm512_mask_storeu_ps(yi + r * plane + v * kLanes, m.store[v], acc[r][v]);
  }
}

using OneChannelTile = void (*)(const float*, const Conv2dShape&, int64_t, const TileMasks&,
                                const float*, const float*, float*);
#define ENGINE_ONE_CHANNEL_ROW(NV)                                                   \
  {                                                                                  \
    one_channel_tile<1, NV>, one_channel_tile<2, NV>, one_channel_tile<3, NV>,       \
        one_channel_tile<4, NV>, one_channel_tile<5, NV>, one_channel_tile<6, NV>,   \
        one_channel_tile<7, NV>, one_channel_tile<8, NV>, one_channel_tile<9, NV>,   \
        one_channel_tile<10, NV>, one_channel_tile<11, NV>, one_channel_tile<12, NV> \
  }
constexpr OneChannelTile kOneChannelTiles[kOneChannelMaxNV][kOneChannelMaxMR] = {
    ENGINE_ONE_CHANNEL_ROW(1), ENGINE_ONE_CHANNEL_ROW(2), ENGINE_ONE_CHANNEL_ROW(3)};
#undef ENGINE_ONE_CHANNEL_ROW

// Channels per tile for the widest tile: 12 x 2 vectors (or 8 x 3) accumulators leave registers
// for the input vectors and the broadcast weight.
int64_t max_mr(const Conv2dShape& s) {
  return s.ow() > 2 * kLanes ? 8 : kOneChannelMaxMR;
}

}  // namespace

bool one_channel_supported(const Conv2dShape& s) {
  return s.c_in == 1 && s.stride == 1 && s.kw <= kOneChannelMaxKw && s.pad <= s.kh - 1 &&
         s.pad <= s.kw - 1 && s.oh() > 0 && s.ow() > 0;
}

void one_channel_forward(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s) {
  const int64_t oh = s.oh(), ow = s.ow(), khw = s.kh * s.kw;
  const Blocks bl(s.c_out, max_mr(s));
  parallel_for(s.n * bl.nb, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / bl.nb, o0 = bl.start(t % bl.nb), mr = bl.size(t % bl.nb);
      const float* xn = x + n * s.h * s.w;
      float* yn = y + (n * s.c_out + o0) * oh * ow;
      for (int64_t c0 = 0; c0 < ow; c0 += kOneChannelMaxNV * kLanes) {
        const int nv =
            static_cast<int>(std::min<int64_t>(kOneChannelMaxNV, ceil_div(ow - c0, kLanes)));
        const TileMasks m = tile_masks(s, c0, nv);
        kOneChannelTiles[nv - 1][mr - 1](xn, s, c0, m, w + o0 * khw, b ? b + o0 : nullptr, yn);
      }
    }
  });
}

void one_channel_forward_pool(const float* x, const float* w, const float* b, float* y,
                              int32_t* arg, const Conv2dShape& s, const Pool2dShape& ps,
                              bool relu) {
  const int64_t oh = s.oh(), ow = s.ow(), khw = s.kh * s.kw, pooled = ps.oh() * ps.ow();
  const Blocks bl(s.c_out, max_mr(s));
  parallel_for(s.n * bl.nb, 1, [&](int64_t t0, int64_t t1) {
    Scratch<float> conv(max_mr(s) * oh * ow);  // one task's output planes: 37 KiB at 12 x 28 x 28
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / bl.nb, o0 = bl.start(t % bl.nb), mr = bl.size(t % bl.nb);
      const float* xn = x + n * s.h * s.w;
      for (int64_t c0 = 0; c0 < ow; c0 += kOneChannelMaxNV * kLanes) {
        const int nv =
            static_cast<int>(std::min<int64_t>(kOneChannelMaxNV, ceil_div(ow - c0, kLanes)));
        const TileMasks m = tile_masks(s, c0, nv);
        kOneChannelTiles[nv - 1][mr - 1](xn, s, c0, m, w + o0 * khw, b ? b + o0 : nullptr,
                                         conv.get());
      }
      const int64_t out = (n * s.c_out + o0) * pooled;
      max_pool2d_planes(conv.get(), y + out, arg + out, mr, ps, relu);
    }
  });
}

}  // namespace engine::kernels::cpu::detail

#endif  // __AVX512F__
