// kernels/gather.h: rows of a table picked by index (a batch gathered from a dataset on the
// device), shared by the CPU reference and the CUDA kernel: element e of the output is element
// e % row_numel of row idx[e / row_numel].
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

template <typename T>
ENGINE_HD void gather_element(const T* table, int64_t row_numel, const int64_t* idx, int64_t e,
                              T* dst) {
  const int64_t r = e / row_numel;
  dst[e] = table[idx[r] * row_numel + (e - r * row_numel)];
}

}  // namespace engine::kernels
