// kernels/optim.h: per-element optimizer updates with torch.optim semantics (SGD, Adam
// non-amsgrad), shared by CPU and CUDA. Coefficients are computed once per step on the host in
// double, as torch's Python code does, then rounded to float like torch's scalar arguments.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

struct SgdConfig {
  double lr = 0.01, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
};

struct SgdCoeffs {
  float neg_lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov;
};

inline SgdCoeffs sgd_coeffs(const SgdConfig& c) {
  return {static_cast<float>(-c.lr), static_cast<float>(c.momentum),
          static_cast<float>(1.0 - c.dampening), static_cast<float>(c.weight_decay), c.nesterov};
}

// One element of torch.optim.SGD.step:
//   d = g + wd*p; buf = first ? d : momentum*buf + (1-dampening)*d;
//   d = nesterov ? d + momentum*buf : buf; p = p - lr*d.
// The buffer is untouched when momentum is 0. fmaf pins the roundings of torch's add(alpha).
ENGINE_HD void sgd_update(float& p, float g, float& buf, const SgdCoeffs& c, bool first) {
  float d = c.weight_decay != 0.f ? fmaf(p, c.weight_decay, g) : g;
  if (c.momentum != 0.f) {
    buf = first ? d : fmaf(d, c.one_minus_dampening, buf * c.momentum);
    d = c.nesterov ? fmaf(buf, c.momentum, d) : buf;
  }
  p = fmaf(d, c.neg_lr, p);
}

struct AdamConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

struct AdamCoeffs {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  float neg_step_size;          // -lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

// step t counts from 1 (torch increments state['step'] before using it).
inline AdamCoeffs adam_coeffs(const AdamConfig& c, int64_t step) {
  double t = static_cast<double>(step);
  double bc1 = 1.0 - std::pow(c.beta1, t), bc2 = 1.0 - std::pow(c.beta2, t);
  return {static_cast<float>(c.beta1),       static_cast<float>(1.0 - c.beta1),
          static_cast<float>(c.beta2),       static_cast<float>(1.0 - c.beta2),
          static_cast<float>(c.eps),         static_cast<float>(c.weight_decay),
          static_cast<float>(-(c.lr / bc1)), static_cast<float>(std::sqrt(bc2))};
}

// One element of torch.optim.Adam.step (amsgrad off):
//   g += wd*p; m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g*g;
//   p -= step_size * m / (sqrt(v)/sqrt(1-beta2^t) + eps).
ENGINE_HD void adam_update(float& p, float g, float& m, float& v, const AdamCoeffs& c) {
  if (c.weight_decay != 0.f) g = fmaf(p, c.weight_decay, g);
  m = fmaf(g, c.one_minus_beta1, m * c.beta1);
  v = fmaf(c.one_minus_beta2 * g, g, v * c.beta2);
  float denom = sqrtf(v) / c.bias_correction2_sqrt + c.eps;
  p = p + c.neg_step_size * m / denom;
}

// One parameter of a fused multi-tensor step (every parameter in one call; on CUDA one launch):
// SGD uses buf as its momentum buffer (null when momentum is 0) and `first` as sgd_update does;
// Adam uses buf and buf2 as m and v.
struct OptimTensor {
  float* param = nullptr;
  const float* grad = nullptr;
  float* buf = nullptr;
  float* buf2 = nullptr;
  int64_t count = 0;
  bool first = false;
};

}  // namespace engine::kernels
