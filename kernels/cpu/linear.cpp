// kernels/cpu/linear.cpp: the fully connected layer as row-major GEMMs, no copies. With AVX-512,
// our own (gemm_f32.h: OpenBLAS 0.3.21 runs AVX2 kernels on Zen 4 and Zen 5); elsewhere OpenBLAS
// sgemm, single-threaded (its idle threads spin and would take the cores our pool needs), our
// pool splitting each product into fixed row blocks, one sgemm per block. Either way every output
// element is computed by one thread in a fixed order, so results do not depend on timing.
#include "kernels/cpu/linear.h"

#include <cblas.h>

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/gemm_f32.h"

namespace engine::kernels::cpu {
namespace {

void check(const LinearShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.in > 0 && s.out > 0, what, ": bad shape N ", s.n, " in ", s.in,
               " out ", s.out);
}

// Rows [0, rows) cut into blocks of kRowBlock rows (the last may be shorter), the blocks split
// over the pool; fn(r0, r1) computes the output rows r0..r1 of one block. The blocks do not
// depend on the thread count: OpenBLAS's kernels (e.g. its AVX Sandy Bridge ones) round an
// element differently by where it falls in the call's M, so one sgemm per thread made 1 and 2
// threads disagree in the last bits.
constexpr int64_t kRowBlock = 32;

void by_rows(int64_t rows, int64_t work_per_row, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  // Below ~1 MFLOP per task, one thread is faster than waking another.
  const int64_t grain =
      std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(1, work_per_row * kRowBlock));
  parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) fn(b * kRowBlock, std::min(rows, (b + 1) * kRowBlock));
  });
}

}  // namespace

void linear_forward(const float* x, const float* w, const float* b, float* y,
                    const LinearShape& s) {
  check(s, "linear_forward");
  if (s.n == 0) return;
  if (b)
    for (int64_t i = 0; i < s.n; ++i) std::copy(b, b + s.out, y + i * s.out);
  if (detail::gemm_f32_available()) {  // y (n, out) (+)= x (n, in) w (out, in)^T
    detail::gemm_f32_nt(s.n, s.out, s.in, x, s.in, w, s.in, y, s.out, b ? 1.f : 0.f);
    return;
  }
  by_rows(s.n, s.out * s.in, [&](int64_t r0, int64_t r1) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, s.out, s.in, 1.f, x + r0 * s.in,
                s.in, w, s.in, b ? 1.f : 0.f, y + r0 * s.out, s.out);
  });
}

void linear_backward_data(const float* dy, const float* w, float* dx, const LinearShape& s) {
  check(s, "linear_backward_data");
  if (s.n == 0) return;
  if (detail::gemm_f32_available()) {  // dx (n, in) = dy (n, out) w (out, in)
    detail::gemm_f32_nn(s.n, s.in, s.out, dy, s.out, 1, w, s.in, dx, s.in, 0.f);
    return;
  }
  by_rows(s.n, s.in * s.out, [&](int64_t r0, int64_t r1) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, s.in, s.out, 1.f,
                dy + r0 * s.out, s.out, w, s.in, 0.f, dx + r0 * s.in, s.in);
  });
}

void linear_backward_weight(const float* dy, const float* x, float* dw, const LinearShape& s,
                            float beta) {
  check(s, "linear_backward_weight");
  if (s.n == 0) {
    for (int64_t i = 0; i < s.out * s.in; ++i) dw[i] = beta == 0.f ? 0.f : beta * dw[i];
    return;
  }
  if (detail::gemm_f32_available()) {  // dw (out, in) = beta dw + dy^T (out, n) x (n, in)
    detail::gemm_f32_nn(s.out, s.in, s.n, dy, 1, s.out, x, s.in, dw, s.in, beta);
    return;
  }
  // dw rows (output features) split over threads: dw[o0:o1] = dy[:, o0:o1]^T x.
  by_rows(s.out, s.in * s.n, [&](int64_t o0, int64_t o1) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, s.in, s.n, 1.f, dy + o0, s.out, x,
                s.in, beta, dw + o0 * s.in, s.in);
  });
}

void linear_backward_bias(const float* dy, float* db, const LinearShape& s, float beta) {
  check(s, "linear_backward_bias");
  // Columns split over threads and blocks of kCols; each column summed over rows in order.
  constexpr int64_t kCols = 256;
  parallel_for(s.out, 64, [&](int64_t o0, int64_t o1) {
    for (int64_t c0 = o0; c0 < o1; c0 += kCols) {
      const int64_t cols = std::min(kCols, o1 - c0);
      float acc[kCols] = {};
      for (int64_t i = 0; i < s.n; ++i) {
        const float* row = dy + i * s.out + c0;
        for (int64_t j = 0; j < cols; ++j) acc[j] += row[j];
      }
      for (int64_t j = 0; j < cols; ++j)
        db[c0 + j] = beta == 0.f ? acc[j] : beta * db[c0 + j] + acc[j];
    }
  });
}

}  // namespace engine::kernels::cpu
