// comm/base/reduce.cpp: see reduce.h.
#include "comm/base/reduce.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "core/error.h"
#include "kernels/cpu/reduce.h"

namespace engine::comm {

ReduceOp reduce_op_from_name(const std::string& s) {
  std::string l = s;
  for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "sum") return ReduceOp::Sum;
  if (l == "avg") return ReduceOp::Avg;
  if (l == "max") return ReduceOp::Max;
  if (l == "min") return ReduceOp::Min;
  if (l == "prod") return ReduceOp::Prod;
  ENGINE_FAIL("unknown reduce op '", s, "' (expected sum, avg, max, min or prod)");
}

void check_reduce_supported(DType dt, ReduceOp op) {
  ENGINE_CHECK(op != ReduceOp::Avg || dtype_is_floating(dt),
               "reduce op AVG needs a floating dtype, got ", dtype_name(dt));
}

// The element loops are kernels/'s (one owner: the same code the kernel benchmark times).
void reduce_into(void* dst, const void* src, size_t count, DType dt, ReduceOp op) {
  namespace k = kernels::cpu;
  const auto n = static_cast<int64_t>(count);
  switch (dt) {
    case DType::F32:
      return k::reduce_into(static_cast<float*>(dst), static_cast<const float*>(src), n, op);
    case DType::I64:
      return k::reduce_into(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, op);
    case DType::F64:
      return k::reduce_into(static_cast<double*>(dst), static_cast<const double*>(src), n, op);
    case DType::I32:
      return k::reduce_into(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, op);
    case DType::U8:
      return k::reduce_into(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n, op);
    case DType::BF16:
      return k::reduce_into_bf16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), n,
                                 op);
    case DType::F16:
      return k::reduce_into_f16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), n,
                                op);
  }
}

void divide_by(void* dst, size_t count, DType dt, int divisor) {
  const float w = static_cast<float>(divisor);
  const auto n = static_cast<int64_t>(count);
  switch (dt) {
    case DType::F32: {
      auto* d = static_cast<float*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] /= w;
      return;
    }
    case DType::F64: {
      auto* d = static_cast<double*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] /= divisor;
      return;
    }
    case DType::BF16:
      return kernels::cpu::divide_bf16(static_cast<uint16_t*>(dst), n, w);
    case DType::F16:
      return kernels::cpu::divide_f16(static_cast<uint16_t*>(dst), n, w);
    default:
      ENGINE_FAIL("divide_by needs a floating dtype, got ", dtype_name(dt));
  }
}

}  // namespace engine::comm
