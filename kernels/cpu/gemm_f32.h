// kernels/cpu/gemm_f32.h: internal to linear.cpp: the fp32 GEMMs of the fully connected layer on
// AVX-512 (OpenBLAS 0.3.21, Debian 12's, runs its AVX2 Haswell kernels on Zen 4 and Zen 5: half
// the FMA peak). Every element of C is summed by one thread in a fixed order (K blocks in turn,
// each block in order), so results do not depend on the thread count or timing.
#pragma once
#include <cstdint>

namespace engine::kernels::cpu::detail {

// Compiled with AVX-512 (-march=native on a CPU that has it): the kernels below exist.
bool gemm_f32_available();

// C (m, n) = beta C + A B. A (m, k): element (i, kk) at a[i * a_rs + kk * a_ks] (either layout of
// a row-major matrix or its transpose); B (k, n) row-major, rows ldb apart. C rows ldc apart;
// beta 0 never reads C. The input and weight gradients of a linear layer.
void gemm_f32_nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_ks,
                 const float* b, int64_t ldb, float* c, int64_t ldc, float beta);

// C (m, n) = beta C + A B^T with A (m, k) and B (n, k) row-major (rows lda, ldb apart): dot
// products along K. A linear layer's forward, x times the weight's transpose.
void gemm_f32_nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc, float beta);

}  // namespace engine::kernels::cpu::detail
