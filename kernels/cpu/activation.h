// kernels/cpu/activation.h: CPU ReLU forward and backward.
#pragma once
#include <cstdint>

#include "kernels/activation.h"

namespace engine::kernels::cpu {

// y = max(x, 0) elementwise over count; y may alias x.
void relu_forward(const float* x, float* y, int64_t count);

// dx = dy where y > 0 else 0; y is the forward output (or input: same sign). dx may alias dy.
void relu_backward(const float* dy, const float* y, float* dx, int64_t count);

}  // namespace engine::kernels::cpu
