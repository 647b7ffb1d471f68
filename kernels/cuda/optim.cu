// kernels/cuda/optim.cu: SGD and Adam steps, grid-stride loops around kernels/optim.h's
// per-element updates; the coefficients are computed once per step on the host, as on the CPU.
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

}  // namespace

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
