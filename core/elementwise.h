// core/elementwise.h: the per-element arithmetic of core's in-place tensor ops, shared by the CPU
// loops in core/tensor.cpp and the CUDA kernels in core/cuda/elementwise.cu.
#pragma once
#include "core/hd.h"

namespace engine {

ENGINE_HD float axpy_op(float dst, float src, float alpha) {
  return dst + alpha * src;
}
ENGINE_HD float scale_op(float x, float s) {
  return x * s;
}

}  // namespace engine
