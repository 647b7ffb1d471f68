// kernels/linear.h: the fully connected layer's shape, shared by CPU and CUDA.
#pragma once
#include <cstdint>

namespace engine::kernels {

// x (N, in), weight (out, in), bias (out), y (N, out): y = x W^T + b, as torch.nn.Linear.
struct LinearShape {
  int64_t n = 0, in = 0, out = 0;
};

}  // namespace engine::kernels
