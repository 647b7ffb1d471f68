// kernels/cuda/optim.cu: SGD and Adam steps, grid-stride loops around kernels/optim.h's
// per-element updates; the coefficients are computed once per step on the host, as on the CPU.
#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/optim.h"

namespace engine::kernels::cuda {
namespace {

__global__ void sgd_kernel(float* param, const float* grad, float* buf, int64_t count, SgdCoeffs c,
                           bool first) {
  for (ENGINE_GRID_LOOP(i, count)) {
    float unused = 0.f;
    sgd_update(param[i], grad[i], buf ? buf[i] : unused, c, first);
  }
}

__global__ void adam_kernel(float* param, const float* grad, float* m, float* v, int64_t count,
                            AdamCoeffs c) {
  for (ENGINE_GRID_LOOP(i, count)) adam_update(param[i], grad[i], m[i], v[i], c);
}

// The fused multi-tensor step's table, passed by value as the kernel's parameter (under the 4 KB
// limit): up to kTable tensors per launch, start[k] the first element of tensor k in the tensors
// laid end to end. Each thread finds its tensor by a binary search over start.
constexpr int kTable = 32;
struct Table {
  OptimTensor t[kTable];
  int64_t start[kTable + 1];
  int n;
};
static_assert(sizeof(Table) < 4000, "a kernel's parameters stay under 4 KB");

__device__ int tensor_of(const Table& tb, int64_t i) {
  int lo = 0, hi = tb.n - 1;  // the last k with start[k] <= i
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tb.start[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// __grid_constant__: the table is read where the launch put it, never copied per thread.
__global__ void sgd_multi_kernel(const __grid_constant__ Table tb, SgdCoeffs c) {
  for (ENGINE_GRID_LOOP(i, tb.start[tb.n])) {
    const int k = tensor_of(tb, i);
    const OptimTensor& t = tb.t[k];
    const int64_t j = i - tb.start[k];
    float unused = 0.f;  // two calls, not a pointer to either: no stack frame
    if (t.buf)
      sgd_update(t.param[j], t.grad[j], t.buf[j], c, t.first);
    else
      sgd_update(t.param[j], t.grad[j], unused, c, t.first);
  }
}

__global__ void adam_multi_kernel(const __grid_constant__ Table tb, AdamCoeffs c) {
  for (ENGINE_GRID_LOOP(i, tb.start[tb.n])) {
    const int k = tensor_of(tb, i);
    const OptimTensor& t = tb.t[k];
    const int64_t j = i - tb.start[k];
    adam_update(t.param[j], t.grad[j], t.buf[j], t.buf2[j], c);
  }
}

// Calls launch(table) for each run of up to kTable tensors of ts.
template <class Launch>
void in_tables(const OptimTensor* ts, int64_t n, Launch launch) {
  for (int64_t b = 0; b < n; b += kTable) {
    Table tb{};
    tb.n = static_cast<int>(std::min<int64_t>(kTable, n - b));
    for (int k = 0; k < tb.n; ++k) {
      ENGINE_CHECK(ts[b + k].count >= 0, "cuda optimizer: tensor ", b + k, " has a negative count");
      tb.t[k] = ts[b + k];
      tb.start[k + 1] = tb.start[k] + ts[b + k].count;
    }
    if (tb.start[tb.n] > 0) launch(tb);
  }
}

}  // namespace

void sgd_step_multi(int device, const OptimTensor* ts, int64_t n, const SgdConfig& c) {
  for (int64_t k = 0; k < n; ++k)
    ENGINE_CHECK(c.momentum == 0.0 || ts[k].buf != nullptr || ts[k].count == 0,
                 "cuda::sgd_step_multi: momentum needs a buffer (tensor ", k, ")");
  ::engine::cuda::DeviceGuard guard(device);
  const SgdCoeffs co = sgd_coeffs(c);
  in_tables(ts, n, [&](Table& tb) {
    if (c.momentum == 0.0)
      for (int k = 0; k < tb.n; ++k) tb.t[k].buf = nullptr;
    sgd_multi_kernel<<<blocks_for(tb.start[tb.n]), kThreads, 0,
                       ::engine::cuda::compute_stream(device)>>>(tb, co);
    CUDA_CHECK_LAUNCH();
  });
}

void adam_step_multi(int device, const OptimTensor* ts, int64_t n, const AdamConfig& c,
                     int64_t step) {
  ENGINE_CHECK(step >= 1, "cuda::adam_step_multi: step counts from 1, got ", step);
  ::engine::cuda::DeviceGuard guard(device);
  const AdamCoeffs co = adam_coeffs(c, step);
  in_tables(ts, n, [&](const Table& tb) {
    adam_multi_kernel<<<blocks_for(tb.start[tb.n]), kThreads, 0,
                        ::engine::cuda::compute_stream(device)>>>(tb, co);
    CUDA_CHECK_LAUNCH();
  });
}

void sgd_step(int device, float* param, const float* grad, float* buf, int64_t count,
              const SgdConfig& c, bool first) {
  ENGINE_CHECK(count >= 0, "cuda::sgd_step: negative count ", count);
  ENGINE_CHECK(c.momentum == 0.0 || buf != nullptr, "cuda::sgd_step: momentum needs a buffer");
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  sgd_kernel<<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(
      param, grad, c.momentum != 0.0 ? buf : nullptr, count, sgd_coeffs(c), first);
  CUDA_CHECK_LAUNCH();
}

void adam_step(int device, float* param, const float* grad, float* m, float* v, int64_t count,
               const AdamConfig& c, int64_t step) {
  ENGINE_CHECK(count >= 0, "cuda::adam_step: negative count ", count);
  ENGINE_CHECK(step >= 1, "cuda::adam_step: step counts from 1, got ", step);
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  adam_kernel<<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(
      param, grad, m, v, count, adam_coeffs(c, step));
  CUDA_CHECK_LAUNCH();
}

}  // namespace engine::kernels::cuda
