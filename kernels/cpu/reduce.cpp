// kernels/cpu/reduce.cpp: loops around the ops of kernels/reduce.h, and the fixed-order sums.
#include "kernels/cpu/reduce.h"

#include <algorithm>

#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {

template <class T, class Op>
void apply(T* __restrict dst, const T* __restrict src, int64_t count, Op op) {
  for (int64_t i = 0; i < count; ++i) dst[i] = op(dst[i], src[i]);
}

template <class T>
void reduce_any(T* dst, const T* src, int64_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:  // the caller divides (comm::divide_by)
      apply(dst, src, count, SumOp{});
      return;
    case ReduceOp::Prod:
      apply(dst, src, count, ProdOp{});
      return;
    case ReduceOp::Max:
      apply(dst, src, count, MaxOp{});
      return;
    case ReduceOp::Min:
      apply(dst, src, count, MinOp{});
      return;
  }
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
