// kernels/cuda/finite.cu: the non-finite scan and the backward's seed on the device, queued on
// the compute stream: nothing here waits for the host, and the host reads the flag only when it
// reads the loss.
#include "core/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/finite.h"

namespace engine::kernels::cuda {
namespace {

__global__ void flag_kernel(const float* x, int64_t count, float* flag) {
  bool bad = false;
  for (ENGINE_GRID_LOOP(i, count)) bad |= !finite_bits(x[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1.0f;  // every writer writes 1
}

__global__ void seed_kernel(const float* loss, float* seed) {
  seed[0] = ::engine::kernels::finite_seed(loss[0]);  // not cuda::finite_seed below
}

}  // namespace

void flag_nonfinite(int device, const float* x, int64_t count, float* flag) {
  ENGINE_CHECK(count >= 0, "cuda::flag_nonfinite: negative count ", count);
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  flag_kernel<<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(x, count,
                                                                                          flag);
  CUDA_CHECK_LAUNCH();
}

void finite_seed(int device, const float* loss, float* seed) {
  ::engine::cuda::DeviceGuard guard(device);
  seed_kernel<<<1, 1, 0, ::engine::cuda::compute_stream(device)>>>(loss, seed);
  CUDA_CHECK_LAUNCH();
}

}  // namespace engine::kernels::cuda
