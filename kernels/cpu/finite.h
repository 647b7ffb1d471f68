// kernels/cpu/finite.h: finding non-finite numbers (kernels/finite.h has the per-element test).
#pragma once
#include <cstdint>

namespace engine::kernels::cpu {

// flag[0] = 1 when any of x[0 .. count) is inf or NaN, else left as it is (callers zero it).
void flag_nonfinite(const float* x, int64_t count, float* flag);
// seed[0] = kernels::finite_seed(loss[0]): the backward's seed gradient.
void finite_seed(const float* loss, float* seed);

}  // namespace engine::kernels::cpu
