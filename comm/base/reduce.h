// comm/base/reduce.h: reduction operators and the element loops collectives combine buffers with
// (dst[i] = dst[i] op src[i]); the loops themselves are kernels/cpu/reduce.h's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/dtype.h"
#include "kernels/reduce.h"

namespace engine::comm {

// Sum, Avg, Max, Min, Prod and their names ("SUM", ...): kernels/reduce.h's. Avg is Sum followed by
// a division by the world size (floating dtypes only). Every dtype reduces; BF16 and F16 combine
// each pair in fp32 and round once (kernels/half.h); uint8 wraps mod 256, int32 and int64 must not
// overflow.
using kernels::reduce_op_name;
using kernels::ReduceOp;

// Parses "sum", "avg", "max", "min", "prod" (any case); throws engine::Error otherwise.
ReduceOp reduce_op_from_name(const std::string& s);

// Throws engine::Error when op cannot apply to dt (Avg on integers).
void check_reduce_supported(DType dt, ReduceOp op);

// dst[i] = dst[i] op src[i] for i < count. Avg combines as Sum here.
void reduce_into(void* dst, const void* src, size_t count, DType dt, ReduceOp op);

// dst[i] /= divisor (the Avg finish, in fp32 and rounded once for BF16 and F16); floating dtypes
// only.
void divide_by(void* dst, size_t count, DType dt, int divisor);

}  // namespace engine::comm
