// kernels/reduce.h: the element ops of collective reductions, shared by CPU and CUDA.
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

enum class ReduceOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

// Max and min propagate NaN from either side (a != a only for NaN; integers never).
struct SumOp {
  template <class T>
  ENGINE_HD T operator()(T a, T b) const {
    return a + b;
  }
};
struct ProdOp {
  template <class T>
  ENGINE_HD T operator()(T a, T b) const {
    return a * b;
  }
};
struct MaxOp {
  template <class T>
  ENGINE_HD T operator()(T a, T b) const {
    return (a != a || a > b) ? a : b;
  }
};
struct MinOp {
  template <class T>
  ENGINE_HD T operator()(T a, T b) const {
    return (a != a || a < b) ? a : b;
  }
};

template <class T>
ENGINE_HD T reduce_apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
      return SumOp{}(a, b);
    case ReduceOp::kProd:
      return ProdOp{}(a, b);
    case ReduceOp::kMax:
      return MaxOp{}(a, b);
    case ReduceOp::kMin:
      return MinOp{}(a, b);
  }
  return a;
}

ENGINE_HD const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

}  // namespace engine::kernels
