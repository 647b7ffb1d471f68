// kernels/cuda/gather.cu: the device gather (kernels/gather.h), a grid-stride loop around
// gather_element. Indices are the host's, checked when the batch was made (data/upload.h).
#include "core/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/gather.h"

namespace engine::kernels::cuda {
namespace {

template <typename T>
__global__ void gather_kernel(const T* table, int64_t row_numel, const int64_t* idx, int64_t count,
                              T* dst) {
  for (ENGINE_GRID_LOOP(e, count)) gather_element(table, row_numel, idx, e, dst);
}

template <typename T>
void launch_gather(int device, const T* table, int64_t row_numel, const int64_t* idx, int64_t n,
                   T* dst) {
  ENGINE_CHECK(n >= 0 && row_numel >= 1, "cuda::gather_rows: ", n, " rows of ", row_numel);
  if (n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  gather_kernel<<<blocks_for(n * row_numel), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(
      table, row_numel, idx, n * row_numel, dst);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void gather_rows_f32(int device, const float* table, int64_t row_numel, const int64_t* idx,
                     int64_t n, float* dst) {
  launch_gather(device, table, row_numel, idx, n, dst);
}

void gather_rows_i64(int device, const int64_t* table, int64_t row_numel, const int64_t* idx,
                     int64_t n, int64_t* dst) {
  launch_gather(device, table, row_numel, idx, n, dst);
}

}  // namespace engine::kernels::cuda
