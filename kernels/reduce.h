// kernels/reduce.h: the reduction operators of the collectives (comm:: uses this enum) and their
// element ops, shared by CPU and CUDA.
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

// The values travel in frame headers (comm/frame.h): append, never renumber. Avg is a Sum whose
// result the caller divides by the world size (floating dtypes only): the element ops and
// reduce_into combine Avg as Sum.
enum class ReduceOp : uint8_t { Sum, Avg, Max, Min, Prod };

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
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return SumOp{}(a, b);
    case ReduceOp::Prod:
      return ProdOp{}(a, b);
    case ReduceOp::Max:
      return MaxOp{}(a, b);
    case ReduceOp::Min:
      return MinOp{}(a, b);
  }
  return a;
}

// "SUM", "AVG", "MAX", "MIN", "PROD" (printed in errors, traces and allreduce_bench's JSON).
ENGINE_HD const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "SUM";
    case ReduceOp::Avg:
      return "AVG";
    case ReduceOp::Max:
      return "MAX";
    case ReduceOp::Min:
      return "MIN";
    case ReduceOp::Prod:
      return "PROD";
  }
  return "?";
}

}  // namespace engine::kernels
