// kernels/batchnorm.h: batch normalisation's per-channel and per-element arithmetic, shared by
// CPU and CUDA. Formulas are torch's CPU ones (aten/src/ATen/native/Normalization.cpp).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

// x (N, C, HW): statistics per channel over count = N*HW values.
struct BatchNormShape {
  int64_t n = 0, c = 0, hw = 0;
  ENGINE_HD int64_t count() const { return n * hw; }
};

template <class T>
ENGINE_HD T bn_invstd(T biased_var, T eps) {
  return T(1) / sqrt(biased_var + eps);
}

// running = momentum * batch + (1 - momentum) * running (torch's order of terms).
template <class T>
ENGINE_HD T bn_running_update(T running, T batch, T momentum) {
  return momentum * batch + (T(1) - momentum) * running;
}

// The running variance takes the unbiased batch variance: var_sum / (count - 1).
template <class T>
ENGINE_HD T bn_unbiased_var(T var_sum, int64_t count) {
  return var_sum / static_cast<T>(count - 1);
}

// y = x * alpha + shift with alpha = invstd * gamma, shift = beta - mean * alpha.
struct BnAffine {
  float alpha, shift;
};
ENGINE_HD BnAffine bn_affine(float mean, float invstd, float gamma, float beta) {
  float alpha = invstd * gamma;
  return {alpha, beta - mean * alpha};
}
ENGINE_HD float bn_apply(float x, BnAffine a) {
  return x * a.alpha + a.shift;
}

// Training-mode input gradient of one element, with per-channel
//   grad_mean = sum(dy) / count, proj_scale = sum((x - mean) * dy) * invstd^2 / count.
ENGINE_HD float bn_backward_dx(float dy, float x, float mean, float invstd, float gamma,
                               float grad_mean, float proj_scale) {
  return ((dy - grad_mean) - (x - mean) * proj_scale) * invstd * gamma;
}

}  // namespace engine::kernels
