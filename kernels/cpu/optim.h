// kernels/cpu/optim.h: CPU optimizer steps over one parameter tensor, torch.optim semantics
// (kernels/optim.h has the per-element updates and the host-side coefficients).
#pragma once
#include <cstdint>

#include "kernels/optim.h"

namespace engine::kernels::cpu {

// torch.optim.SGD.step for one parameter (count elements). buf is the momentum buffer (count,
// unused when momentum is 0); first = true on the step that creates it (buf = gradient).
void sgd_step(float* param, const float* grad, float* buf, int64_t count, const SgdConfig& c,
              bool first);

// torch.optim.Adam.step (amsgrad off) for one parameter: m, v (count) start at zero; step counts
// from 1 and is the step being taken.
void adam_step(float* param, const float* grad, float* m, float* v, int64_t count,
               const AdamConfig& c, int64_t step);

// The fused multi-tensor forms: every tensor of ts (n of them) in one call, split over the
// threads by elements across tensor boundaries; each element gets exactly sgd_step's or
// adam_step's operations, so the results are the per-tensor calls' bit for bit.
void sgd_step_multi(const OptimTensor* ts, int64_t n, const SgdConfig& c);
void adam_step_multi(const OptimTensor* ts, int64_t n, const AdamConfig& c, int64_t step);

}  // namespace engine::kernels::cpu
