// kernels/reduce.h: the reduction operators of the collectives (comm:: uses this enum) and their
// element ops, shared by CPU and CUDA.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/hd.h"

namespace engine::kernels {

// The values travel in frame headers (comm/base/frame.h): append, never renumber. Avg is a Sum
// whose result the caller divides by the world size (floating dtypes only): the element ops and
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

// "SUM", "AVG", "MAX", "MIN", "PROD" (printed in errors, traces and allreduce_bench's JSON).
inline const char* reduce_op_name(ReduceOp op) {
  static constexpr const char* kNames[] = {"SUM", "AVG", "MAX", "MIN", "PROD"};
  const auto i = static_cast<size_t>(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

}  // namespace engine::kernels
