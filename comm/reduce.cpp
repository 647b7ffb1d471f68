// comm/reduce.cpp: see reduce.h. Plain loops: the compiler vectorises them (-O3 -march=native).
#include "comm/reduce.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace engine::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::AVG:
      return "AVG";
    case ReduceOp::MAX:
      return "MAX";
    case ReduceOp::MIN:
      return "MIN";
    case ReduceOp::PROD:
      return "PROD";
  }
  return "?";
}

ReduceOp reduce_op_from_name(const std::string& s) {
  std::string l = s;
  for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "sum") return ReduceOp::SUM;
  if (l == "avg") return ReduceOp::AVG;
  if (l == "max") return ReduceOp::MAX;
  if (l == "min") return ReduceOp::MIN;
  if (l == "prod") return ReduceOp::PROD;
  ENGINE_FAIL("unknown reduce op '", s, "' (expected sum, avg, max, min or prod)");
}

void check_reduce_supported(DType dt, ReduceOp op) {
  ENGINE_CHECK(op != ReduceOp::AVG || dt == DType::F32,
               "reduce op AVG needs a floating dtype, got ", dtype_name(dt));
}

namespace {

template <class T>
void reduce_loop(T* __restrict d, const T* __restrict s, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      for (size_t i = 0; i < n; ++i) d[i] += s[i];
      break;
    case ReduceOp::PROD:
      for (size_t i = 0; i < n; ++i) d[i] *= s[i];
      break;
    case ReduceOp::MAX:
      for (size_t i = 0; i < n; ++i) d[i] = std::max(d[i], s[i]);
      break;
    case ReduceOp::MIN:
      for (size_t i = 0; i < n; ++i) d[i] = std::min(d[i], s[i]);
      break;
  }
}

}  // namespace

void reduce_into(void* dst, const void* src, size_t count, DType dt, ReduceOp op) {
  switch (dt) {
    case DType::F32:
      reduce_loop(static_cast<float*>(dst), static_cast<const float*>(src), count, op);
      return;
    case DType::I64:
      reduce_loop(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), count, op);
      return;
    case DType::U8:
      reduce_loop(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count, op);
      return;
  }
}

void divide_by(void* dst, size_t count, DType dt, int divisor) {
  ENGINE_CHECK(dt == DType::F32, "divide_by needs F32, got ", dtype_name(dt));
  auto* d = static_cast<float*>(dst);
  const float w = static_cast<float>(divisor);
  for (size_t i = 0; i < count; ++i) d[i] /= w;
}

}  // namespace engine::comm
