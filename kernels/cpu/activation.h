// kernels/cpu/activation.h: ReLU and dropout on CPU (loops around kernels/activation.h and
// kernels/dropout.h). Shapes: flat arrays of count elements; dropout2d: (planes, plane_size).
#pragma once
#include <cstdint>

namespace engine::kernels::cpu {

void relu_forward(const float* x, float* y, int64_t count);
// dx = dy where y > 0 (y the forward output), else 0.
void relu_backward(const float* dy, const float* y, float* dx, int64_t count);

// y = x * mask / (1 - p), mask drawn from Philox (seed, offset), one draw per element. Applying it
// to dy with the same (seed, offset) is the backward.
void dropout_forward(const float* x, float* y, int64_t count, float p, uint64_t seed,
                     uint64_t offset);
// One draw per plane (n, c): the whole plane is kept (scaled) or zeroed.
void dropout2d_forward(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                       uint64_t seed, uint64_t offset);

}  // namespace engine::kernels::cpu
