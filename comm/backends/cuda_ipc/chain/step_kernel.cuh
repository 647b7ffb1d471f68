// comm/backends/cuda_ipc/chain/step_kernel.cuh: the event-chained ring's one kernel: a step of
// plan.h over one chunk, grid-stride, float4 where every pointer is 16-byte aligned (a scalar tail
// otherwise). No flags, no spin: the steps are ordered by stream waits on IPC events.
#pragma once
#include <cstdint>

#include "comm/backends/cuda_ipc/chain/plan.h"

namespace engine::comm::ipc::chain {

constexpr int kStepThreads = 256;

struct StepArgs {
  float* buf = nullptr;         // this rank's buffer + chunk begin: [n]
  float* data = nullptr;        // the caller's tensor + chunk begin: [n] (read; written if to_data)
  const float* left = nullptr;  // left's buffer (mapped) + chunk begin: [n]
  int64_t n = 0;
  StepKind kind = StepKind::CopyIn;
  bool to_data = false;
  bool vec = false;       // all three 16-byte aligned
  float divide_by = 0.f;  // AVG's W on the final reduce, else 0
};

template <class Op>
__device__ __forceinline__ float4 step4(const StepArgs& a, float4 x, float4 l, Op op) {
  return make_float4(
      step_value(a.kind, x.x, l.x, op, a.divide_by), step_value(a.kind, x.y, l.y, op, a.divide_by),
      step_value(a.kind, x.z, l.z, op, a.divide_by), step_value(a.kind, x.w, l.w, op, a.divide_by));
}

template <class Op>
__global__ void __launch_bounds__(kStepThreads) chain_step_kernel(StepArgs a, Op op) {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const bool read_x = a.kind != StepKind::Gather, read_l = a.kind != StepKind::CopyIn;
  const int64_t n4 = a.vec ? a.n / 4 : 0;
  for (int64_t j = tid; j < n4; j += stride) {
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 x = read_x ? reinterpret_cast<const float4*>(a.data)[j] : zero;
    const float4 l = read_l ? reinterpret_cast<const float4*>(a.left)[j] : zero;
    const float4 v = step4(a, x, l, op);
    reinterpret_cast<float4*>(a.buf)[j] = v;
    if (a.to_data) reinterpret_cast<float4*>(a.data)[j] = v;
  }
  for (int64_t i = n4 * 4 + tid; i < a.n; i += stride) {
    const float x = read_x ? a.data[i] : 0.f, l = read_l ? a.left[i] : 0.f;
    const float v = step_value(a.kind, x, l, op, a.divide_by);
    a.buf[i] = v;
    if (a.to_data) a.data[i] = v;
  }
}

}  // namespace engine::comm::ipc::chain
