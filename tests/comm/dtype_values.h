// tests/comm/dtype_values.h: test values of every dtype for the collective tests - small integers,
// unique to rank and position, that every dtype holds exactly and whose sums (up to 9 ranks),
// products (of 1s and 2s) and maxima stay exact, so any order of combining gives the same bits.
// put/get move one element between a buffer of any dtype and a double.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/base/reduce.h"
#include "io/dtype.h"
#include "kernels/half.h"

namespace engine::comm::testing {

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::F32, DType::BF16, DType::F16,
                                       DType::I32, DType::I64,  DType::U8};
  return v;
}

inline std::vector<ReduceOp> ops_for(DType dt) {
  std::vector<ReduceOp> v = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min};
  if (dtype_is_floating(dt)) v.push_back(ReduceOp::Avg);
  return v;
}

// Stores v (an integer the dtype holds, or any value for the floats: rounded to nearest even).
inline void put(DType dt, void* buf, size_t i, double v) {
  switch (dt) {
    case DType::F32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      return;
    case DType::BF16:
      static_cast<uint16_t*>(buf)[i] = kernels::bf16_from_f32(static_cast<float>(v));
      return;
    case DType::F16:
      static_cast<uint16_t*>(buf)[i] = kernels::f16_from_f32(static_cast<float>(v));
      return;
    case DType::I32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      return;
    case DType::I64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v);
      return;
    case DType::U8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v) & 0xFF);
      return;
    case DType::F64:
      static_cast<double*>(buf)[i] = v;
      return;
  }
}

inline double get(DType dt, const void* buf, size_t i) {
  switch (dt) {
    case DType::F32:
      return static_cast<const float*>(buf)[i];
    case DType::BF16:
      return kernels::f32_from_bf16(static_cast<const uint16_t*>(buf)[i]);
    case DType::F16:
      return kernels::f32_from_f16(static_cast<const uint16_t*>(buf)[i]);
    case DType::I32:
      return static_cast<const int32_t*>(buf)[i];
    case DType::I64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DType::U8:
      return static_cast<const uint8_t*>(buf)[i];
    case DType::F64:
      return static_cast<const double*>(buf)[i];
  }
  return 0;
}

// Rank r's element i: 1..16 for the sums, maxima and minima; 1 or 2 for products.
inline double tval(int rank, size_t i, ReduceOp op) {
  if (op == ReduceOp::Prod) return 1.0 + static_cast<double>((i / 3 + rank) % 2);
  return 1.0 + static_cast<double>((i * 7 + rank * 5) % 16);
}

// The expected reduction over `world` ranks of element i, as the dtype stores it: exact, then
// (Avg) divided in fp32 and rounded once as divide_by does; uint8 wraps.
inline double texpect(DType dt, int world, size_t i, ReduceOp op) {
  double acc = tval(0, i, op);
  for (int r = 1; r < world; ++r) {
    const double v = tval(r, i, op);
    if (op == ReduceOp::Prod)
      acc *= v;
    else if (op == ReduceOp::Max)
      acc = v > acc ? v : acc;
    else if (op == ReduceOp::Min)
      acc = v < acc ? v : acc;
    else
      acc += v;
  }
  if (op == ReduceOp::Avg) acc = static_cast<float>(acc) / static_cast<float>(world);
  std::byte one[8];
  put(dt, one, 0, acc);
  return get(dt, one, 0);
}

// A buffer of count elements of dt holding tval(rank, i + offset, op).
inline std::vector<std::byte> tbuf(DType dt, size_t count, int rank, ReduceOp op,
                                   size_t offset = 0) {
  std::vector<std::byte> b(count * dtype_size(dt) + 1);  // + 1: never empty
  for (size_t i = 0; i < count; ++i) put(dt, b.data(), i, tval(rank, i + offset, op));
  return b;
}

// "" when buf (count elements) holds want(i) at every i, else the first difference.
template <class F>
std::string tcheck(DType dt, const void* buf, size_t count, F want) {
  for (size_t i = 0; i < count; ++i) {
    const double got = get(dt, buf, i), w = want(i);
    if (got != w)
      return std::string(dtype_long_name(dt)) + " [" + std::to_string(i) +
             "] = " + std::to_string(got) + ", expected " + std::to_string(w);
  }
  return "";
}

}  // namespace engine::comm::testing
