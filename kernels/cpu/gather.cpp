// kernels/cpu/gather.cpp: see gather.h.
#include "kernels/cpu/gather.h"

#include "core/error.h"
#include "kernels/gather.h"

namespace engine::kernels::cpu {
namespace {

template <typename T>
void gather_rows(const T* table, int64_t rows, int64_t row_numel, const int64_t* idx, int64_t n,
                 T* dst) {
  ENGINE_CHECK(n >= 0 && row_numel >= 1, "gather_rows: ", n, " rows of ", row_numel);
  for (int64_t i = 0; i < n; ++i)
    ENGINE_CHECK(idx[i] >= 0 && idx[i] < rows, "gather_rows: index ", idx[i], " at position ", i,
                 " is outside 0..", rows - 1);
  for (int64_t e = 0; e < n * row_numel; ++e) gather_element(table, row_numel, idx, e, dst);
}

}  // namespace

void gather_rows_f32(const float* table, int64_t rows, int64_t row_numel, const int64_t* idx,
                     int64_t n, float* dst) {
  gather_rows(table, rows, row_numel, idx, n, dst);
}

void gather_rows_i64(const int64_t* table, int64_t rows, int64_t row_numel, const int64_t* idx,
                     int64_t n, int64_t* dst) {
  gather_rows(table, rows, row_numel, idx, n, dst);
}

}  // namespace engine::kernels::cpu
