// kernels/cpu/reduce.cpp: loops around the ops of kernels/reduce.h, and the fixed-order sums.
#include "kernels/cpu/reduce.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "kernels/half.h"

namespace engine::kernels::cpu {
namespace {

template <class T, class Op>
void apply(T* __restrict dst, const T* __restrict src, int64_t count, Op op) {
  for (int64_t i = 0; i < count; ++i) dst[i] = op(dst[i], src[i]);
}

// The 16-bit floats: widen both sides, combine in fp32, round once.
struct Bf16 {
  static float load(uint16_t h) { return f32_from_bf16(h); }
  static uint16_t store(float x) { return bf16_from_f32(x); }
};
struct F16 {
  static float load(uint16_t h) { return f32_from_f16(h); }
  static uint16_t store(float x) { return f16_from_f32(x); }
};

template <class C, class Op>
void apply16(uint16_t* __restrict dst, const uint16_t* __restrict src, int64_t count, Op op) {
  for (int64_t i = 0; i < count; ++i) dst[i] = C::store(op(C::load(dst[i]), C::load(src[i])));
}

// Calls f(op functor) for op; Avg combines as Sum (the caller divides: comm::divide_by).
template <class F>
void with_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return f(SumOp{});
    case ReduceOp::Prod:
      return f(ProdOp{});
    case ReduceOp::Max:
      return f(MaxOp{});
    case ReduceOp::Min:
      return f(MinOp{});
  }
}

template <class T>
void reduce_any(T* dst, const T* src, int64_t count, ReduceOp op) {
  with_op(op, [&](auto o) { apply(dst, src, count, o); });
}

template <class C>
void divide16(uint16_t* dst, int64_t count, float divisor) {
  for (int64_t i = 0; i < count; ++i) dst[i] = C::store(C::load(dst[i]) / divisor);
}

constexpr int64_t kBlock = 4096;
constexpr int64_t kStripes = 64;  // fixed work split of sum(), independent of the thread count

}  // namespace

void reduce_into(float* dst, const float* src, int64_t count, ReduceOp op) {
  reduce_any(dst, src, count, op);
}
void reduce_into(double* dst, const double* src, int64_t count, ReduceOp op) {
  reduce_any(dst, src, count, op);
}
void reduce_into(int64_t* dst, const int64_t* src, int64_t count, ReduceOp op) {
  reduce_any(dst, src, count, op);
}
void reduce_into(int32_t* dst, const int32_t* src, int64_t count, ReduceOp op) {
  reduce_any(dst, src, count, op);
}
void reduce_into(uint8_t* dst, const uint8_t* src, int64_t count, ReduceOp op) {
  reduce_any(dst, src, count, op);
}
void reduce_into_bf16(uint16_t* dst, const uint16_t* src, int64_t count, ReduceOp op) {
  with_op(op, [&](auto o) { apply16<Bf16>(dst, src, count, o); });
}
void reduce_into_f16(uint16_t* dst, const uint16_t* src, int64_t count, ReduceOp op) {
  with_op(op, [&](auto o) { apply16<F16>(dst, src, count, o); });
}
void divide_bf16(uint16_t* dst, int64_t count, float divisor) {
  divide16<Bf16>(dst, count, divisor);
}
void divide_f16(uint16_t* dst, int64_t count, float divisor) {
  divide16<F16>(dst, count, divisor);
}

void scale(float* dst, int64_t count, float s) {
  for (int64_t i = 0; i < count; ++i) dst[i] *= s;
}
void scale(double* dst, int64_t count, double s) {
  for (int64_t i = 0; i < count; ++i) dst[i] *= s;
}

float sum_block(const float* x, int64_t count) {
  constexpr int kL = 64;
  float acc[kL] = {};
  int64_t i = 0;
  for (; i + kL <= count; i += kL)
    for (int l = 0; l < kL; ++l) acc[l] += x[i + l];
  for (int l = 0; i + l < count; ++l) acc[l] += x[i + l];
  for (int width = kL / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

double sum(const float* x, int64_t count) {
  if (count <= 0) return 0.0;
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  const int64_t stripes = std::min(kStripes, blocks);
  double part[kStripes];
  parallel_for(stripes, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      double acc = 0.0;
      for (int64_t b = blocks * s / stripes; b < blocks * (s + 1) / stripes; ++b) {
        int64_t i0 = b * kBlock;
        acc += sum_block(x + i0, std::min(kBlock, count - i0));
      }
      part[s] = acc;
    }
  });
  double total = 0.0;
  for (int64_t s = 0; s < stripes; ++s) total += part[s];
  return total;
}

}  // namespace engine::kernels::cpu
