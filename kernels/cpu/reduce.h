// kernels/cpu/reduce.h: CPU reduction steps for the collectives, scaling and deterministic sums.
// reduce_into and scale run on the calling thread (the comm threads call them); sum uses the pool.
#pragma once
#include <cstdint>

#include "kernels/reduce.h"

namespace engine::kernels::cpu {

// dst[i] = op(dst[i], src[i]) for i < count (Avg combines as Sum).
void reduce_into(float* dst, const float* src, int64_t count, ReduceOp op);
void reduce_into(double* dst, const double* src, int64_t count, ReduceOp op);
void reduce_into(int64_t* dst, const int64_t* src, int64_t count, ReduceOp op);
void reduce_into(int32_t* dst, const int32_t* src, int64_t count, ReduceOp op);
void reduce_into(uint8_t* dst, const uint8_t* src, int64_t count, ReduceOp op);  // wraps mod 256
// The 16-bit floats as bits (kernels/half.h): each element combined in fp32 and rounded once.
void reduce_into_bf16(uint16_t* dst, const uint16_t* src, int64_t count, ReduceOp op);
void reduce_into_f16(uint16_t* dst, const uint16_t* src, int64_t count, ReduceOp op);
// dst[i] = round(widen(dst[i]) / divisor): the Avg finish of the 16-bit floats.
void divide_bf16(uint16_t* dst, int64_t count, float divisor);
void divide_f16(uint16_t* dst, int64_t count, float divisor);

// dst[i] *= s.
void scale(float* dst, int64_t count, float s);
void scale(double* dst, int64_t count, double s);

// Sum of x (count) on this thread in a fixed order: 64 lanes, then a fixed tree.
float sum_block(const float* x, int64_t count);

// Sum of x (count): 4096-float blocks by sum_block, block sums added in double in block order.
// The bits do not depend on the thread count.
double sum(const float* x, int64_t count);

}  // namespace engine::kernels::cpu
