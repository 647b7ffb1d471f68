// kernels/activation.h: ReLU's per-element arithmetic, shared by CPU and CUDA.
#pragma once
#include "core/hd.h"

namespace engine::kernels {

// max(x, 0); NaN stays NaN, as torch.relu.
ENGINE_HD float relu(float x) {
  return x < 0.f ? 0.f : x;
}

// Gradient given the forward output y (or the input x: same sign): dy where y > 0, else 0.
ENGINE_HD float relu_grad(float dy, float y) {
  return y > 0.f ? dy : 0.f;
}

}  // namespace engine::kernels
