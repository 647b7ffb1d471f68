// kernels/cpu/pool.h: max_pool2d on CPU. x (N, C, H, W) -> y (N, C, OH, OW); arg holds, per
// output, the index of the chosen input inside its (H, W) plane, for the backward.
#pragma once
#include <cstdint>

#include "kernels/pool.h"

namespace engine::kernels::cpu {

void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s);
// dx (N, C, H, W) = scatter of dy through arg (overwrites dx).
void max_pool2d_backward(const float* dy, const int32_t* arg, float* dx, const Pool2dShape& s);

}  // namespace engine::kernels::cpu
