// kernels/cpu/gemm_bf16.h: internal to the bf16 layers (bf16_ops.cpp, conv2d/bf16*.cpp): the
// GEMM C = A B with bf16 operands and fp32 sums on vdpbf16ps (AVX512_BF16; callers check it).
// Operands are read in place from fp32 memory through strides, blocks or offset tables, rounded
// to bf16 (nearest even) while they are packed into K-pair panels, so one GEMM serves linear,
// im2col-free convolution and their gradients. Every element of C is summed by one thread in a
// fixed order: results do not depend on the thread count or timing.
#pragma once
#include <cstdint>

namespace engine::kernels::cpu::detail {

// The GEMM's fixed costs (packing, two parallel regions) outweigh its gain on products of fewer
// multiply-adds than this: the bf16 layers take the rounding reference there.
inline constexpr double kBf16GemmMinMacs = 1 << 18;

// An (R, K) operand: element (r, k), r a row of A or a column of B and k the reduction index,
// is at p[roff(r) + koff(k)], where roff(r) = r_off[r] when r_off is set, else
// (r / r_block) * r_block_stride + (r % r_block) * rs (r_block 0: r * rs); koff likewise.
// A or B may instead come pre-converted: with bf16 set, the K-pair kk of row r is the 32-bit
// word at bf16 + roff(r) + koff(kk) (offsets in bf16 elements; koff indexes pairs), read in place
// by the microkernel without packing. Words past the end of K must be finite (the other operand
// is zero there). A B read so needs rs 2 (a panel's columns are consecutive words), no r_off,
// r_block a multiple of 32, and readable words up to the end of the last panel of 32 columns.
struct Bf16Operand {
  const float* p = nullptr;
  const uint16_t* bf16 = nullptr;
  const uint32_t* packed = nullptr;  // its panels, packed by pack_bf16 at gemm_bf16's width
  int64_t rs = 0, ks = 0;
  int64_t r_block = 0, r_block_stride = 0;
  int64_t k_block = 0, k_block_stride = 0;
  const int64_t* r_off = nullptr;
  const int64_t* k_off = nullptr;
};

// C element (i, j) is at c[row(i) + col(j)], row(i) = row_off ? row_off[i] : i * ldc, col(j) =
// col_off ? col_off[j] : j * cs; a negative offset: not stored. The columns col_off keeps in each
// run of 16 from a multiple of 16 must land on consecutive addresses. C = beta C + A B (+ bias[j])
// (+ row_bias[i]); beta 0 never reads C.
struct Bf16Output {
  float* c = nullptr;
  int64_t ldc = 0, cs = 1;
  const int64_t* row_off = nullptr;
  const int64_t* col_off = nullptr;
  const float* bias = nullptr;
  const float* row_bias = nullptr;
  float beta = 0.f;
};

// dst (Hp, Wp) words = the planes lo, hi (H, W) as bf16 pairs (low: lo, high: hi; nearest even)
// placed at row pt, column pl, zeros elsewhere (conv2d/direct_simd.h's pad_plane, converted). Wp <=
// 128.
void bf16_pairs_plane(const float* lo, const float* hi, int64_t h, int64_t w, int64_t pt,
                      int64_t pl, int64_t hp, int64_t wp, uint32_t* dst);
// dst (Hp, Wp) = the plane src (H, W) as bf16 (nearest even) at row pt, column pl, zeros
// elsewhere. Wp <= 128.
void bf16_plane(const float* src, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t hp,
                int64_t wp, uint16_t* dst);

// C (m, n) = A (m, k) B (k, n): a as (m, k) and b as (n, k) operands. serial: all on the calling
// thread (inside a parallel_for task).
void gemm_bf16(int64_t m, int64_t n, int64_t k, const Bf16Operand& a, const Bf16Operand& b,
               const Bf16Output& c, bool serial = false);

// The panel widths gemm_bf16 uses for n columns: A panels of mr rows, B panels of nr columns.
int bf16_panel_mr(int64_t n);
int bf16_panel_nr(int64_t n);
// o's rows packed into panels of `width` (K-pairs interleaved), for Bf16Operand::packed: an
// operand packed once and used by several gemm_bf16 calls. dst holds ceil(rows / width) *
// width * ceil(k / 2) words.
void pack_bf16(const Bf16Operand& o, int64_t rows, int64_t k, int width, uint32_t* dst);

}  // namespace engine::kernels::cpu::detail
