// kernels/cpu/gemm_f32.cpp: the fp32 GEMMs of gemm_f32.h, compiled for AVX-512 by target
// attributes (as gemm_bf16.cpp), used where the CPU has it (cpu_features).
//   nn: a 12 x 32 tile in 24 zmm accumulators; each step of K broadcasts 12 values of A (packed
//       once into panels of 12 rows, K-major) and loads 32 of B's row (in place: B is row-major
//       along N). Threads take panels of 32 columns.
//   nt: a 4 x 6 tile of dot products, 24 zmm accumulators of 16 K-lanes each, reduced at the end
//       of each K block. Threads take groups of 6 rows of B.
// Tiles at the edges compute with a valid row in place of a missing one and store only theirs.
#include "kernels/cpu/gemm_f32.h"

#include <immintrin.h>

#include <algorithm>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/scratch.h"

#define ENGINE_F32_TARGET __attribute__((target("avx512f")))

namespace engine::kernels::cpu::detail {
namespace {

constexpr int kMr = 12, kNr = 32;      // nn tile
constexpr int kTr = 4, kTc = 6;        // nt tile
constexpr int64_t kKcNn = 256;         // nn K block: a B panel of 256 x 32 floats (32 KiB) in L1
constexpr int64_t kKcNt = 1024;        // nt K block: 6 rows of B (24 KiB) in L1, A's block in L2
constexpr int64_t kMinTask = 1 << 20;  // MACs: below this, one thread is faster than waking two

// The first count of 16 lanes (none for count <= 0).
__mmask16 lanes(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// tile rows [0, rows) (16 V floats each, `cols` of them kept) into C rows ldc apart: C = tile
// (+ scale C, when read).
ENGINE_F32_TARGET void store_rows(const float* tile, int v, int64_t rows, int64_t cols, float* c,
                                  int64_t ldc, bool read, float scale) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < rows; ++i)
    for (int h = 0; h < v; ++h) {
      const __mmask16 m = lanes(cols - 16 * h);
      if (!m) break;
      float* ci = c + i * ldc + 16 * h;
      __m512 t = _mm512_loadu_ps(tile + (i * v + h) * 16);
      if (read) t = _mm512_fmadd_ps(vs, _mm512_maskz_loadu_ps(m, ci), t);
      _mm512_mask_storeu_ps(ci, m, t);
    }
}

// C rows [0, mr) (mr <= 12), columns [0, nc) (nc <= 32) = (first: beta C, else C) + the product of
// a packed A panel (kc x 12, [kk][row]) and B's rows [0, kc) (ldb apart, in place).
ENGINE_F32_TARGET void tile_nn(const float* ap, const float* b, int64_t ldb, float* c, int64_t ldc,
                               int64_t mr, int64_t nc, int64_t kc, bool first, float beta) {
  const __mmask16 m0 = lanes(nc), m1 = lanes(nc - 16);
  __m512 acc[kMr][2];
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b + kk * ldb);
    const __m512 b1 = _mm512_maskz_loadu_ps(m1, b + kk * ldb + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(ap[kk * kMr + i]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
  }
  // Through a buffer with fixed bounds: indexing acc by mr would keep it in memory in the loop.
  alignas(64) float tile[kMr * kNr];
#pragma GCC unroll 12
  for (int i = 0; i < kMr; ++i) {
    _mm512_store_ps(tile + i * kNr, acc[i][0]);
    _mm512_store_ps(tile + i * kNr + 16, acc[i][1]);
  }
  store_rows(tile, 2, mr, nc, c, ldc, !first || beta != 0.f, first ? beta : 1.f);
}

// The sum of v's 16 lanes, in a fixed order (halves, quarters, then pairs). maskz forms: GCC 12
// warns on the plain ones' undefined pass-through (as _mm512_reduce_add_ps does).
ENGINE_F32_TARGET float sum_lanes(__m512 v) {
  const __m512d d = _mm512_castps_pd(v);
  const __m256 h = _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 0)),
                                 _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 1)));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

// acc[i][j] += A row i . B row j over 16 K-lanes at kk (m: the lanes that exist).
ENGINE_F32_TARGET inline void dot_step(__m512 (&acc)[kTr][kTc], const float* const (&ar)[kTr],
                                       const float* const (&br)[kTc], int64_t kk, __mmask16 m) {
  __m512 bv[kTc];
#pragma GCC unroll 6
  for (int j = 0; j < kTc; ++j) bv[j] = _mm512_maskz_loadu_ps(m, br[j] + kk);
#pragma GCC unroll 4
  for (int i = 0; i < kTr; ++i) {
    const __m512 av = _mm512_maskz_loadu_ps(m, ar[i] + kk);
#pragma GCC unroll 6
    for (int j = 0; j < kTc; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
  }
}

// C tile (tr <= 4 rows of A, tc <= 6 rows of B) = (first: beta C, else C) + dot products over K
// [0, kc) of rows that start at a and b.
ENGINE_F32_TARGET void tile_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                               int64_t ldc, int64_t tr, int64_t tc, int64_t kc, bool first,
                               float beta) {
  const float* ar[kTr];
  const float* br[kTc];
  for (int i = 0; i < kTr; ++i) ar[i] = a + (i < tr ? i : 0) * lda;
  for (int j = 0; j < kTc; ++j) br[j] = b + (j < tc ? j : 0) * ldb;
  __m512 acc[kTr][kTc];
  for (int i = 0; i < kTr; ++i)
    for (int j = 0; j < kTc; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t kk = 0;
  for (; kk + 16 <= kc; kk += 16) dot_step(acc, ar, br, kk, 0xFFFF);
  if (kk < kc) dot_step(acc, ar, br, kk, lanes(kc - kk));
  float sums[kTr][kTc];
#pragma GCC unroll 4
  for (int i = 0; i < kTr; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < kTc; ++j) sums[i][j] = sum_lanes(acc[i][j]);
  for (int i = 0; i < tr; ++i)
    for (int j = 0; j < tc; ++j) {
      float& out = c[i * ldc + j];
      out = first ? (beta == 0.f ? sums[i][j] : beta * out + sums[i][j]) : out + sums[i][j];
    }
}

// A (m, k) into panels of 12 rows, [panel][kk][row], rows past m zero.
void pack_a(int64_t m, int64_t k, const float* a, int64_t a_rs, int64_t a_ks, float* dst) {
  const int64_t panels = (m + kMr - 1) / kMr;
  parallel_for(panels, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, k * kMr)),
               [&](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p) {
                   float* d = dst + p * k * kMr;
                   for (int64_t kk = 0; kk < k; ++kk)
                     for (int i = 0; i < kMr; ++i) {
                       const int64_t r = p * kMr + i;
                       d[kk * kMr + i] = r < m ? a[r * a_rs + kk * a_ks] : 0.f;
                     }
                 }
               });
}

}  // namespace

bool gemm_f32_available() {
  return has_avx512f();
}

void gemm_f32_nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_ks,
                 const float* b, int64_t ldb, float* c, int64_t ldc, float beta) {
  const int64_t row_panels = (m + kMr - 1) / kMr, panels = (n + kNr - 1) / kNr;
  Scratch<float> packed(row_panels * kMr * k);
  pack_a(m, k, a, a_rs, a_ks, packed.get());
  const int64_t grain = std::max<int64_t>(1, kMinTask / std::max<int64_t>(1, m * k * kNr));
  parallel_for(panels, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t j0 = p * kNr, nc = std::min<int64_t>(kNr, n - j0);
      for (int64_t k0 = 0; k0 < std::max<int64_t>(k, 1); k0 += kKcNn) {
        const int64_t kc = std::max<int64_t>(0, std::min(kKcNn, k - k0));
        for (int64_t r = 0; r < row_panels; ++r)
          tile_nn(packed.get() + (r * k + k0) * kMr, b + k0 * ldb + j0, ldb, c + r * kMr * ldc + j0,
                  ldc, std::min<int64_t>(kMr, m - r * kMr), nc, kc, k0 == 0, beta);
      }
    }
  });
}

void gemm_f32_nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc, float beta) {
  const int64_t groups = (n + kTc - 1) / kTc;
  const int64_t grain = std::max<int64_t>(1, kMinTask / std::max<int64_t>(1, m * k * kTc));
  parallel_for(groups, grain, [&](int64_t g0, int64_t g1) {
    for (int64_t k0 = 0; k0 < std::max<int64_t>(k, 1); k0 += kKcNt) {
      const int64_t kc = std::max<int64_t>(0, std::min(kKcNt, k - k0));
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t j0 = g * kTc, tc = std::min<int64_t>(kTc, n - j0);
        for (int64_t i0 = 0; i0 < m; i0 += kTr)
          tile_nt(a + i0 * lda + k0, lda, b + j0 * ldb + k0, ldb, c + i0 * ldc + j0, ldc,
                  std::min<int64_t>(kTr, m - i0), tc, kc, k0 == 0, beta);
      }
    }
  });
}

}  // namespace engine::kernels::cpu::detail
