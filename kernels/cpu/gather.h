// kernels/cpu/gather.h: the CPU reference of the device gather (kernels/gather.h).
#pragma once
#include <cstdint>

namespace engine::kernels::cpu {

// dst (n, row_numel) = table[idx[i]] for i < n; table holds `rows` rows. Throws engine::Error
// naming the position of an index outside 0 .. rows-1.
void gather_rows_f32(const float* table, int64_t rows, int64_t row_numel, const int64_t* idx,
                     int64_t n, float* dst);
void gather_rows_i64(const int64_t* table, int64_t rows, int64_t row_numel, const int64_t* idx,
                     int64_t n, int64_t* dst);

}  // namespace engine::kernels::cpu
