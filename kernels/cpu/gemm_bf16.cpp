// kernels/cpu/gemm_bf16.cpp: the bf16 GEMM of gemm_bf16.h. B is packed whole into panels of NR
// columns, A one panel of MR rows at a time by the thread that uses it (or either is read in
// place, Bf16Operand::bf16); a panel holds K-pairs interleaved as vdpbf16ps wants them: uint32
// (low: k even, high: k odd) at [k / 2][row]. The MR x NR microkernel keeps 16 fp32 zmm
// accumulators (8 x 32 or 16 x 16, the one that pads N least). Code is compiled for AVX512_BF16
// by target attributes, like peak.cpp.
#include "kernels/cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>

#include "core/allocator.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/scratch.h"

#define ENGINE_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace engine::kernels::cpu::detail {
namespace {
// Scratch of at least 16 elements: the kernels read whole vectors.
template <class T>
struct Padded : Scratch<T> {
  explicit Padded(int64_t count) : Scratch<T>(count, 16) {}
};
using Words = Padded<uint32_t>;

int64_t offset(int64_t i, int64_t stride, int64_t block, int64_t block_stride,
               const int64_t* table) {
  if (table) return table[i];
  if (block) return i / block * block_stride + i % block * stride;
  return i * stride;
}
int64_t roff(const Bf16Operand& o, int64_t r) {
  return offset(r, o.rs, o.r_block, o.r_block_stride, o.r_off);
}
int64_t koff(const Bf16Operand& o, int64_t k) {
  return offset(k, o.ks, o.k_block, o.k_block_stride, o.k_off);
}
// [i0, i0 + count) lies in one block (the offsets are i * stride apart there).
bool one_block(int64_t i0, int64_t count, int64_t block) {
  return block == 0 || i0 / block == (i0 + count - 1) / block;
}

uint32_t bf16_bits(float x) {
  return std::bit_cast<uint32_t>(round_to_bf16(x)) >> 16;
}

// Panel rows [r0, r0 + rows) of o, K-pairs [k0 / 2, ceil(k1 / 2)), into dst[(k / 2 - k0 / 2) *
// width + row]; rows >= rows and k >= k1 are zeros. k0 is even. Any layout, one element at a time.
void pack_scalar(const Bf16Operand& o, int64_t r0, int64_t rows, int64_t k0, int64_t k1, int width,
                 uint32_t* dst) {
  for (int64_t k = k0; k < k1; k += 2)
    for (int i = 0; i < width; ++i) {
      uint32_t pair = 0;
      if (i < rows) {
        const int64_t r = roff(o, r0 + i);
        pair = bf16_bits(o.p[r + koff(o, k)]);
        if (k + 1 < k1) pair |= bf16_bits(o.p[r + koff(o, k + 1)]) << 16;
      }
      dst[(k - k0) / 2 * width + i] = pair;
    }
}

// Rows contiguous (rs 1, no table): each K-pair is two runs of `rows` floats, converted with
// vcvtne2ps2bf16 and interleaved with vpermw.
ENGINE_BF16_TARGET void pack_rows_contiguous(const Bf16Operand& o, int64_t r0, int64_t rows,
                                             int64_t k0, int64_t k1, int width, uint32_t* dst) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  const float* base = o.p + roff(o, r0);
  for (int64_t k = k0; k < k1; k += 2) {
    const float* p0 = base + koff(o, k);
    const float* p1 = k + 1 < k1 ? base + koff(o, k + 1) : nullptr;
    uint32_t* d = dst + (k - k0) / 2 * width;
    for (int c = 0; c < width; c += 16) {
      const int64_t valid = std::clamp<int64_t>(rows - c, 0, 16);
      const __mmask16 lm = static_cast<__mmask16>((1u << valid) - 1);
      const __m512 v0 = _mm512_maskz_loadu_ps(lm, p0 + c);
      const __m512 v1 = p1 ? _mm512_maskz_loadu_ps(lm, p1 + c) : _mm512_setzero_ps();
      const __m512i bf = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);  // v0 in the low half
      const int lanes = std::min(16, width - c);
      _mm512_mask_storeu_epi32(d + c, static_cast<__mmask16>((1u << lanes) - 1),
                               _mm512_permutexvar_epi16(idx, bf));
    }
  }
}

// GCC 12 takes the _mm512_undefined_epi32 inside vpunpck*'s intrinsics for uninitialized use.
#pragma GCC diagnostic push
#if !defined(__clang__)  // clang has no such warning (and warns of the unknown name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// 8 rows of 16 dwords transposed: column m (8 dwords, one per row) comes out at once. 4 x 4
// transposes in each 128-bit lane: t[j] lane l holds rows 0-3 of column 4l + j, u[j] rows 4-7.
struct Transposed8x16 {
  alignas(64) uint32_t t[4][16], u[4][16];
  ENGINE_BF16_TARGET explicit Transposed8x16(const __m512i (&r)[8]) {
    for (int h = 0; h < 2; ++h) {
      const __m512i* in = r + 4 * h;
      const __m512i s0 = _mm512_unpacklo_epi32(in[0], in[1]);
      const __m512i s1 = _mm512_unpackhi_epi32(in[0], in[1]);
      const __m512i s2 = _mm512_unpacklo_epi32(in[2], in[3]);
      const __m512i s3 = _mm512_unpackhi_epi32(in[2], in[3]);
      uint32_t(*out)[16] = h ? u : t;
      _mm512_store_si512(out[0], _mm512_unpacklo_epi64(s0, s2));
      _mm512_store_si512(out[1], _mm512_unpackhi_epi64(s0, s2));
      _mm512_store_si512(out[2], _mm512_unpacklo_epi64(s1, s3));
      _mm512_store_si512(out[3], _mm512_unpackhi_epi64(s1, s3));
    }
  }
  void column(int64_t m, void* dst) const {
    std::memcpy(dst, &t[m % 4][4 * (m / 4)], 16);
    std::memcpy(static_cast<char*>(dst) + 16, &u[m % 4][4 * (m / 4)], 16);
  }
};

// Run kc of 32 k (kn of them valid) of the row at p (o's row offset applied), k contiguous within
// each K block: lanes 0-15 in lo, 16-31 in hi, zeros past kn. A run that crosses into the next
// block is read in two parts.
struct KRun {
  int64_t ko, ko2;  // where the run starts; where its part in the next block starts
  int64_t split;    // k of the run in the first block
  __mmask16 m0, m1, m2, m3;
};

// Where the run of k [kc, kc + kn) lies in o (relative to a row), and its lane masks.
KRun locate_k_run(const Bf16Operand& o, int64_t kc, int64_t kn) {
  KRun r;
  r.ko = koff(o, kc);
  r.split = kn;
  if (!one_block(kc, kn, o.k_block)) r.split = (kc / o.k_block + 1) * o.k_block - kc;
  r.ko2 = r.split < kn ? koff(o, kc + r.split) : r.ko;
  // First part: lanes [0, split); second: lanes [split, kn), read from ko2 - split on.
  auto lanes = [](int64_t a, int64_t b) {  // lanes [a, b) of 16
    a = std::clamp<int64_t>(a, 0, 16), b = std::clamp<int64_t>(b, 0, 16);
    return static_cast<__mmask16>(b > a ? ((1u << b) - 1) & ~((1u << a) - 1) : 0);
  };
  r.m0 = lanes(0, r.split), r.m1 = lanes(0, r.split - 16);
  r.m2 = lanes(r.split, kn), r.m3 = lanes(r.split - 16, kn - 16);
  return r;
}

ENGINE_BF16_TARGET __m512i load_k_run(const float* p, const KRun& r) {
  __m512 lo = _mm512_maskz_loadu_ps(r.m0, p + r.ko),
         hi = _mm512_maskz_loadu_ps(r.m1, p + r.ko + 16);
  if (r.m2 | r.m3) {  // lanes l >= split from the next block: p + ko2 + (l - split)
    const float* q = p + r.ko2 - r.split;
    lo = _mm512_mask_loadu_ps(lo, r.m2, q);
    hi = _mm512_mask_loadu_ps(hi, r.m3, q + 16);
  }
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // dword m: pair m of the run
}

// K contiguous within blocks (ks 1, no table), k0 a multiple of 32: 8 rows x 32 k at a time are
// converted (16 pairs a row) and transposed into [pair][row].
ENGINE_BF16_TARGET void pack_k_contiguous(const Bf16Operand& o, int64_t r0, int64_t rows,
                                          int64_t k0, int64_t k1, int width, uint32_t* dst) {
  for (int64_t kc = k0; kc < k1; kc += 32) {
    const int64_t kn = std::min<int64_t>(32, k1 - kc), pairs = (kn + 1) / 2;
    const KRun run = locate_k_run(o, kc, kn);
    uint32_t* d = dst + (kc - k0) / 2 * width;
    for (int g = 0; g < width; g += 8) {
      __m512i r[8];
      for (int i = 0; i < 8; ++i)
        r[i] = g + i < rows ? load_k_run(o.p + roff(o, r0 + g + i), run) : _mm512_setzero_si512();
      Transposed8x16 tr(r);
      for (int64_t m = 0; m < pairs; ++m) tr.column(m, d + m * width + g);
    }
  }
}

#pragma GCC diagnostic pop

void pack(const Bf16Operand& o, int64_t r0, int64_t rows, int64_t k0, int64_t k1, int width,
          uint32_t* dst) {
  if (rows <= 0 || k1 <= k0) {
    std::memset(dst, 0, sizeof(uint32_t) * width * ((k1 - k0 + 1) / 2 > 0 ? (k1 - k0 + 1) / 2 : 0));
    return;
  }
  if (o.rs == 1 && !o.r_off && one_block(r0, rows, o.r_block)) {
    pack_rows_contiguous(o, r0, rows, k0, k1, width, dst);
    return;
  }
  // A run crossing a block boundary is read in two parts: blocks of at least 32 k, so that a run
  // crosses one boundary at most.
  const bool kc = o.ks == 1 && !o.k_off && k0 % 32 == 0 && (o.k_block == 0 || o.k_block >= 32);
  if (kc)
    pack_k_contiguous(o, r0, rows, k0, k1, width, dst);
  else
    pack_scalar(o, r0, rows, k0, k1, width, dst);
}

// tile (MR, 16 NV) = A panel (kp pairs x MR) times B panel (kp pairs x 16 NV).
template <int MR, int NV>
ENGINE_BF16_TARGET void microkernel(const uint32_t* a, const uint32_t* b, int64_t kp, float* tile) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kp; ++kk) {
    __m512bh bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + (kk * NV + v) * 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[kk * MR + i]));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(tile + (i * NV + v) * 16, acc[i][v]);
}

// The same with A read in place (Bf16Operand::bf16): pair kk of row i at a + ro[i] + ko[kk].
// Pairs [kk0, kk1) only, added to tile when add is set (K blocks of one tile).
template <int MR, int NV>
ENGINE_BF16_TARGET void microkernel_direct(const uint16_t* a, const int64_t* ro, const int64_t* ko,
                                           const uint32_t* b, int64_t kk0, int64_t kk1, bool add,
                                           float* tile) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      acc[i][v] = add ? _mm512_loadu_ps(tile + (i * NV + v) * 16) : _mm512_setzero_ps();
  const uint16_t* rows[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) rows[i] = a + ro[i];
  for (int64_t kk = kk0; kk < kk1; ++kk) {
    const int64_t k = ko[kk];
    __m512bh bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + (kk * NV + v) * 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      uint32_t word;
      std::memcpy(&word, rows[i] + k, 4);
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(word));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(tile + (i * NV + v) * 16, acc[i][v]);
}

// The same with B read in place (Bf16Operand::bf16): pair kk of the panel's columns at b + ko[kk].
template <int MR, int NV>
ENGINE_BF16_TARGET void microkernel_bdirect(const uint32_t* a, const uint16_t* b, const int64_t* ko,
                                            int64_t kp, float* tile) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kp; ++kk) {
    const uint16_t* p = b + ko[kk];
    __m512bh bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(p + v * 32);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[kk * MR + i]));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(tile + (i * NV + v) * 16, acc[i][v]);
}

// Bf16Output::col_off digested per run of 16 columns: which it keeps, where the first goes.
struct ColumnRuns {
  const uint16_t* mask;
  const int64_t* base;
};

// C rows [i0, i0 + rows), columns [j0, j0 + 16 NV) (j0 a multiple of 16) = tile (+ beta C)
// (+ row_bias) through col_off: each run's kept columns compressed and stored at once.
ENGINE_BF16_TARGET void store_tile_runs(const float* tile, int nr, int64_t i0, int64_t rows,
                                        int64_t j0, const Bf16Output& c, const ColumnRuns& runs) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = c.row_off ? c.row_off[i0 + i] : (i0 + i) * c.ldc;
    if (row < 0) continue;
    const __m512 rb = _mm512_set1_ps(c.row_bias ? c.row_bias[i0 + i] : 0.f);
    for (int v = 0; v < nr / 16; ++v) {
      const int64_t run = j0 / 16 + v;
      const __mmask16 keep = runs.mask[run];
      if (!keep) continue;
      const __mmask16 m = static_cast<__mmask16>((1u << __builtin_popcount(keep)) - 1);
      float* p = c.c + row + runs.base[run];
      __m512 x = _mm512_maskz_compress_ps(
          keep, _mm512_add_ps(_mm512_loadu_ps(tile + i * nr + v * 16), rb));
      if (c.beta != 0.f)
        x = _mm512_fmadd_ps(_mm512_set1_ps(c.beta), _mm512_maskz_loadu_ps(m, p), x);
      _mm512_mask_storeu_ps(p, m, x);
    }
  }
}

// C rows [i0, i0 + rows), columns [j0, j0 + cols) = tile (+ beta C) (+ bias).
// C rows [i0, i0 + rows) at consecutive addresses, columns cs apart: column by column, 8 rows
// transposed at a time (beta 0), the rest one by one.
ENGINE_BF16_TARGET void store_tile_by_columns(const float* tile, int nr, int64_t row, int64_t rows,
                                              int64_t j0, int64_t cols, const Bf16Output& c) {
  int64_t done = 0;
  for (; c.beta == 0.f && done + 8 <= rows; done += 8)
    for (int64_t v = 0; v < cols; v += 16) {
      const __mmask16 m = static_cast<__mmask16>((1u << std::min<int64_t>(16, cols - v)) - 1);
      const __m512 b = c.bias ? _mm512_maskz_loadu_ps(m, c.bias + j0 + v) : _mm512_setzero_ps();
      __m512i r[8];
      for (int i = 0; i < 8; ++i)
        r[i] = _mm512_castps_si512(_mm512_add_ps(_mm512_loadu_ps(tile + (done + i) * nr + v), b));
      Transposed8x16 tr(r);
      for (int64_t j = 0; j < std::min<int64_t>(16, cols - v); ++j)
        tr.column(j, c.c + row + done + (j0 + v + j) * c.cs);
    }
  if (done == rows) return;
  for (int64_t j = 0; j < cols; ++j) {
    float* p = c.c + row + (j0 + j) * c.cs;
    const float b = c.bias ? c.bias[j0 + j] : 0.f;
    if (c.beta == 0.f)
      for (int64_t i = done; i < rows; ++i) p[i] = tile[i * nr + j] + b;
    else
      for (int64_t i = done; i < rows; ++i) p[i] = c.beta * p[i] + tile[i * nr + j] + b;
  }
}

ENGINE_BF16_TARGET void store_tile(const float* tile, int nr, int64_t i0, int64_t rows, int64_t j0,
                                   int64_t cols, const Bf16Output& c) {
  if (c.cs != 1 && !c.col_off && !c.row_bias) {
    const int64_t first = c.row_off ? c.row_off[i0] : i0 * c.ldc;
    const int64_t last = c.row_off ? c.row_off[i0 + rows - 1] : (i0 + rows - 1) * c.ldc;
    if (first >= 0 && last - first == rows - 1 && (c.row_off || c.ldc == 1))
      return store_tile_by_columns(tile, nr, first, rows, j0, cols, c);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = c.row_off ? c.row_off[i0 + i] : (i0 + i) * c.ldc;
    if (row < 0) continue;
    const float* t = tile + i * nr;
    const float rb = c.row_bias ? c.row_bias[i0 + i] : 0.f;
    if (c.cs != 1 || c.col_off || c.row_bias) {
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t col = c.col_off ? c.col_off[j0 + j] : (j0 + j) * c.cs;
        if (col < 0) continue;
        float* p = c.c + row + col;
        float v = t[j] + (c.bias ? c.bias[j0 + j] : 0.f) + rb;
        *p = c.beta == 0.f ? v : c.beta * *p + v;
      }
      continue;
    }
    for (int64_t j = 0; j < cols; j += 16) {
      const int64_t valid = std::min<int64_t>(16, cols - j);
      const __mmask16 m = static_cast<__mmask16>((1u << valid) - 1);
      float* p = c.c + row + j0 + j;
      __m512 v = _mm512_loadu_ps(t + j);
      if (c.bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c.bias + j0 + j));
      if (c.beta != 0.f)
        v = _mm512_fmadd_ps(_mm512_set1_ps(c.beta), _mm512_maskz_loadu_ps(m, p), v);
      _mm512_mask_storeu_ps(p, m, v);
    }
  }
}

// The tile grain: 2M MACs a task at least (as linear.cpp's fp32 1M: below that, one thread is
// faster than waking another).
template <int MR, int NR>
int64_t tile_grain(int64_t kp) {
  return std::max<int64_t>(1, (1 << 21) / (MR * NR * std::max<int64_t>(kp, 1) * 2));
}

// parallel_for, or fn(0, n) on this thread when serial.
void for_range(bool serial, int64_t n, int64_t grain,
               const std::function<void(int64_t, int64_t)>& fn) {
  if (serial) {
    if (n > 0) fn(0, n);
  } else {
    parallel_for(n, grain, fn);
  }
}

// All of o's panels of `width` rows, K-pairs [0, kp), into dst: tasks over (panel, 1024 k).
void pack_all(const Bf16Operand& o, int64_t rows, int64_t k, int width, uint32_t* dst,
              bool serial) {
  constexpr int64_t kChunk = 1024;  // a multiple of 32
  const int64_t kp = (k + 1) / 2, nb = (rows + width - 1) / width;
  const int64_t chunks = std::max<int64_t>(1, (k + kChunk - 1) / kChunk);
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / (width * std::min(k, kChunk) + 1));
  for_range(serial, nb * chunks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t jb = t / chunks, k0 = t % chunks * kChunk;
      pack(o, jb * width, std::min<int64_t>(width, rows - jb * width), k0, std::min(k, k0 + kChunk),
           width, dst + jb * kp * width + k0 / 2 * width);
    }
  });
}

// B in place: A packed whole, tiles in column-panel order (a B panel stays in L1 over the rows).
template <int MR, int NV>
void gemm_b_direct(int64_t m, int64_t n, int64_t k, const Bf16Operand& a, const Bf16Operand& b,
                   const Bf16Output& c, bool serial) {
  constexpr int NR = 16 * NV;
  ENGINE_CHECK(b.rs == 2 && !b.r_off && b.r_block % 32 == 0, "gemm_bf16: B in place needs rs 2, ",
               "no r_off and r_block a multiple of 32");
  const int64_t kp = (k + 1) / 2, mb = (m + MR - 1) / MR, nb = (n + NR - 1) / NR;
  Words ap(a.packed ? 1 : mb * kp * MR);
  if (!a.packed) pack_all(a, m, k, MR, ap.get(), serial);
  const uint32_t* apanels = a.packed ? a.packed : ap.get();
  Padded<int64_t> ko(kp), base(nb * NV);
  Padded<uint16_t> mask(nb * NV);
  for (int64_t kk = 0; kk < kp; ++kk) ko.get()[kk] = koff(b, kk);
  for (int64_t run = 0; c.col_off && run < nb * NV; ++run) {
    uint16_t keep = 0;
    int64_t first = -1;
    for (int l = 0; l < 16; ++l) {
      const int64_t j = run * 16 + l;
      if (j >= n || c.col_off[j] < 0) continue;
      keep |= static_cast<uint16_t>(1u << l);
      if (first < 0) first = c.col_off[j];
    }
    mask.get()[run] = keep, base.get()[run] = first;
  }
  const ColumnRuns runs{mask.get(), base.get()};
  for_range(serial, mb * nb, tile_grain<MR, NR>(kp), [&](int64_t t0, int64_t t1) {
    alignas(64) float tile[MR * NR];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t jb = t / mb, ib = t % mb;
      const int64_t rows = std::min<int64_t>(MR, m - ib * MR);
      microkernel_bdirect<MR, NV>(apanels + ib * kp * MR, b.bf16 + roff(b, jb * NR), ko.get(), kp,
                                  tile);
      if (c.col_off)
        store_tile_runs(tile, NR, ib * MR, rows, jb * NR, c, runs);
      else
        store_tile(tile, NR, ib * MR, rows, jb * NR, std::min<int64_t>(NR, n - jb * NR), c);
    }
  });
}

template <int MR, int NV>
void gemm(int64_t m, int64_t n, int64_t k, const Bf16Operand& a, const Bf16Operand& b,
          const Bf16Output& c, bool serial) {
  if (b.bf16) return gemm_b_direct<MR, NV>(m, n, k, a, b, c, serial);
  constexpr int NR = 16 * NV;
  const int64_t kp = (k + 1) / 2, mb = (m + MR - 1) / MR, nb = (n + NR - 1) / NR;
  Words bpk(b.packed ? 1 : nb * kp * NR);
  if (!b.packed) pack_all(b, n, k, NR, bpk.get(), serial);
  const uint32_t* bp = b.packed ? b.packed : bpk.get();
  const int64_t grain = tile_grain<MR, NR>(kp);
  if (a.bf16) {  // A in place: its pair offsets once, its row offsets per panel
    Padded<int64_t> ko(kp);
    for (int64_t kk = 0; kk < kp; ++kk) ko.get()[kk] = koff(a, kk);
    // K blocks outermost, so a block of B panel (kKb pairs: 24 KiB at 32 columns) stays in L1
    // for all of a task's tiles, whose sums wait in tiles between blocks (192 measured 1.5x
    // faster than 512 on the conv weight gradients; 96 no better).
    constexpr int64_t kKb = 192;
    for_range(serial, mb * nb, grain, [&](int64_t t0, int64_t t1) {
      Padded<float> tiles((t1 - t0) * MR * NR);
      int64_t ro[MR];
      for (int64_t kk0 = 0; kk0 < std::max<int64_t>(kp, 1); kk0 += kKb)
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t ib = t / nb, jb = t % nb;
          const int64_t rows = std::min<int64_t>(MR, m - ib * MR);
          for (int i = 0; i < MR; ++i) ro[i] = roff(a, ib * MR + (i < rows ? i : 0));
          microkernel_direct<MR, NV>(a.bf16, ro, ko.get(), bp + jb * kp * NR, kk0,
                                     std::min(kp, kk0 + kKb), kk0 > 0,
                                     tiles.get() + (t - t0) * MR * NR);
        }
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t ib = t / nb, jb = t % nb;
        store_tile(tiles.get() + (t - t0) * MR * NR, NR, ib * MR,
                   std::min<int64_t>(MR, m - ib * MR), jb * NR, std::min<int64_t>(NR, n - jb * NR),
                   c);
      }
    });
    return;
  }
  // Tiles in row-panel order, so a thread packs each A panel it needs once.
  for_range(serial, mb * nb, grain, [&](int64_t t0, int64_t t1) {
    Words ap(kp * MR);
    alignas(64) float tile[MR * NR];
    int64_t packed = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ib = t / nb, jb = t % nb;
      const int64_t rows = std::min<int64_t>(MR, m - ib * MR);
      if (ib != packed) pack(a, ib * MR, rows, 0, k, MR, ap.get()), packed = ib;
      microkernel<MR, NV>(ap.get(), bp + jb * kp * NR, kp, tile);
      store_tile(tile, NR, ib * MR, rows, jb * NR, std::min<int64_t>(NR, n - jb * NR), c);
    }
  });
}

// The chunks of 16 columns of a padded row (Wp wide, the plane's w columns from column pl on):
// chunk c0's output lane l takes source column c0 + l - pl. Each chunk loads from column
// max(c0 - pl, 0) and moves lanes up by `shift` (pl for the first chunk when pl > 0, else 0);
// `load` masks the source lanes read, `keep` the output lanes that hold data, `store` those
// inside the row.
struct RowChunk {
  int64_t src;
  int shift;
  __mmask16 load, keep, store;
};

int row_chunks(int64_t w, int64_t pl, int64_t wp, RowChunk* out) {
  int count = 0;
  for (int64_t c0 = 0; c0 < wp; c0 += 16) {
    RowChunk& ch = out[count++];
    const int64_t s0 = c0 - pl;
    ch.src = std::max<int64_t>(s0, 0);
    ch.shift = static_cast<int>(ch.src - s0);
    const int64_t loaded = std::clamp<int64_t>(w - ch.src, 0, 16 - ch.shift);
    ch.load = static_cast<__mmask16>((1u << loaded) - 1);
    ch.keep = static_cast<__mmask16>(ch.load << ch.shift);
    ch.store = static_cast<__mmask16>((1u << std::min<int64_t>(16, wp - c0)) - 1);
  }
  return count;
}

// Each bit of a 16-bit lane mask twice: the mask of the lanes' 32 words.
uint32_t word_pairs(__mmask16 m) {
  uint32_t out = 0;
  for (int l = 0; l < 16; ++l)
    if (m >> l & 1) out |= 3u << (2 * l);
  return out;
}

ENGINE_BF16_TARGET void bf16_pairs_plane_avx512(const float* lo, const float* hi, int64_t h,
                                                int64_t w, int64_t pt, int64_t pl, int64_t hp,
                                                int64_t wp, uint32_t* dst) {
  // Word 2l of a chunk: lo's lane l - shift (word l - shift of vcvtne2ps2bf16's result), word
  // 2l + 1: hi's (word 16 + l - shift).
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  RowChunk chunks[8];
  ENGINE_CHECK(wp <= 16 * 8, "bf16_pairs_plane: rows of ", wp, " columns");
  const int n = row_chunks(w, pl, wp, chunks);
  __m512i idx[8];
  __mmask32 keep[8];
  for (int c = 0; c < n; ++c) {
    idx[c] = _mm512_sub_epi16(_mm512_load_si512(kInterleave), _mm512_set1_epi16(chunks[c].shift));
    keep[c] = word_pairs(chunks[c].keep);
  }
  for (int64_t r = 0; r < hp; ++r, dst += wp) {
    const int64_t i = r - pt;
    const bool data = i >= 0 && i < h;
    for (int c = 0; c < n; ++c) {
      const RowChunk& ch = chunks[c];
      __m512i out = _mm512_setzero_si512();
      if (data) {
        const __m512 v0 = _mm512_maskz_loadu_ps(ch.load, lo + i * w + ch.src);
        const __m512 v1 = _mm512_maskz_loadu_ps(ch.load, hi + i * w + ch.src);
        out = _mm512_maskz_permutexvar_epi16(keep[c], idx[c], (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
      }
      _mm512_mask_storeu_epi32(dst + 16 * c, ch.store, out);
    }
  }
}

ENGINE_BF16_TARGET void bf16_plane_avx512(const float* src, int64_t h, int64_t w, int64_t pt,
                                          int64_t pl, int64_t hp, int64_t wp, uint16_t* dst) {
  alignas(32) static constexpr uint16_t kLanes[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                      8, 9, 10, 11, 12, 13, 14, 15};
  RowChunk chunks[8];
  ENGINE_CHECK(wp <= 16 * 8, "bf16_plane: rows of ", wp, " columns");
  const int n = row_chunks(w, pl, wp, chunks);
  __m256i idx[8];
  for (int c = 0; c < n; ++c)
    idx[c] = _mm256_sub_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(kLanes)),
                              _mm256_set1_epi16(static_cast<int16_t>(chunks[c].shift)));
  for (int64_t r = 0; r < hp; ++r, dst += wp) {
    const int64_t i = r - pt;
    const bool data = i >= 0 && i < h;
    for (int c = 0; c < n; ++c) {
      const RowChunk& ch = chunks[c];
      __m256i out = _mm256_setzero_si256();
      if (data) {
        const __m256i bf =
            (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(ch.load, src + i * w + ch.src));
        out = _mm256_maskz_permutexvar_epi16(ch.keep, idx[c], bf);
      }
      _mm256_mask_storeu_epi16(dst + 16 * c, ch.store, out);
    }
  }
}

// 16-column panels when they pad N less than 32-column ones (N = 10, 16, 48, ...).
bool narrow(int64_t n) {
  return (n + 15) / 16 * 16 < (n + 31) / 32 * 32;
}

}  // namespace

void bf16_pairs_plane(const float* lo, const float* hi, int64_t h, int64_t w, int64_t pt,
                      int64_t pl, int64_t hp, int64_t wp, uint32_t* dst) {
  bf16_pairs_plane_avx512(lo, hi, h, w, pt, pl, hp, wp, dst);
}

void bf16_plane(const float* src, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t hp,
                int64_t wp, uint16_t* dst) {
  bf16_plane_avx512(src, h, w, pt, pl, hp, wp, dst);
}

int bf16_panel_mr(int64_t n) {
  return narrow(n) ? 16 : 8;
}
int bf16_panel_nr(int64_t n) {
  return narrow(n) ? 16 : 32;
}

void pack_bf16(const Bf16Operand& o, int64_t rows, int64_t k, int width, uint32_t* dst) {
  pack_all(o, rows, k, width, dst, false);
}

void gemm_bf16(int64_t m, int64_t n, int64_t k, const Bf16Operand& a, const Bf16Operand& b,
               const Bf16Output& c, bool serial) {
  if (m <= 0 || n <= 0) return;
  if (narrow(n))
    gemm<16, 1>(m, n, k, a, b, c, serial);
  else
    gemm<8, 2>(m, n, k, a, b, c, serial);
}

}  // namespace engine::kernels::cpu::detail
