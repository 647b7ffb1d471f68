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
  ENGINE_CHECK(op != ReduceOp::Avg || dt == DType::F32,
               "reduce op AVG needs a floating dtype, got ", dtype_name(dt));
  ENGINE_CHECK(dt != DType::U8, "reduce op ", reduce_op_name(op),
               " on U8: only F32 and I64 reduce");
}

// The element loops are kernels/'s (one owner: the same code the kernel benchmark times).
void reduce_into(void* dst, const void* src, size_t count, DType dt, ReduceOp op) {
  const auto n = static_cast<int64_t>(count);
  switch (dt) {
    case DType::F32:
      return kernels::cpu::reduce_into(static_cast<float*>(dst), static_cast<const float*>(src), n,
                                       op);
    case DType::I64:
      return kernels::cpu::reduce_into(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src),
                                       n, op);
    case DType::U8:
    case DType::I32:
      ENGINE_FAIL("reductions of ", dtype_name(dt), " buffers are not supported (F32 and I64 are)");
  }
}

void divide_by(void* dst, size_t count, DType dt, int divisor) {
  ENGINE_CHECK(dt == DType::F32, "divide_by needs F32, got ", dtype_name(dt));
  auto* d = static_cast<float*>(dst);
  const float w = static_cast<float>(divisor);
  for (size_t i = 0; i < count; ++i) d[i] /= w;
}

}  // namespace engine::comm
