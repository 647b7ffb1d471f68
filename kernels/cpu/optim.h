// kernels/cpu/optim.h: SGD and Adam updates over a parameter's elements, on CPU (loops around
// kernels/optim.h, which the CUDA kernels share).
#pragma once
#include <cstdint>

#include "kernels/optim.h"

namespace engine::kernels::cpu {

// buf may be null when momentum is 0. first: the parameter's first step (buf = d).
void sgd_step(float* p, const float* g, float* buf, int64_t count, const SgdConfig& c,
              bool first);
// step counts from 1.
void adam_step(float* p, const float* g, float* m, float* v, int64_t count, const AdamConfig& c,
               int64_t step);

}  // namespace engine::kernels::cpu
