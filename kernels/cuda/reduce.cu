// kernels/cuda/reduce.cu: the collectives' element steps (dst = op(dst, src), dst *= s) around
// kernels/reduce.h, and the per-channel sums behind the bias gradients.
#include "core/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/internal.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/reduce.h"

namespace engine::kernels::cuda {
namespace {

template <class T, class Op>
__global__ void reduce_kernel(T* dst, const T* src, int64_t count, Op op) {
  for (ENGINE_GRID_LOOP(i, count)) dst[i] = op(dst[i], src[i]);
}

__global__ void scale_kernel(float* dst, int64_t count, float s) {
  for (ENGINE_GRID_LOOP(i, count)) dst[i] *= s;
}

__global__ void __launch_bounds__(kThreads)
    channel_sum_kernel(const float* x, float* out, int64_t n, int64_t c, int64_t hw, float beta) {
  __shared__ double scratch[kThreads];
  const int64_t ch = blockIdx.x;
  double part = 0.0;
  for (int64_t j = threadIdx.x; j < n * hw; j += kThreads)
    part += static_cast<double>(x[channel_index(ch, j, c, hw)]);
  const double sum = block_sum(part, scratch);
  if (threadIdx.x == 0)
    out[ch] = beta == 0.f ? static_cast<float>(sum) : beta * out[ch] + static_cast<float>(sum);
}

template <class T>
void launch_reduce(int device, T* dst, const T* src, int64_t count, ReduceOp op) {
  ENGINE_CHECK(count >= 0, "cuda::reduce_into: negative count ", count);
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  cudaStream_t stream = ::engine::cuda::compute_stream(device);
  const int blocks = blocks_for(count);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:  // the caller divides (comm::divide_by)
      reduce_kernel<<<blocks, kThreads, 0, stream>>>(dst, src, count, SumOp{});
      break;
    case ReduceOp::Prod:
      reduce_kernel<<<blocks, kThreads, 0, stream>>>(dst, src, count, ProdOp{});
      break;
    case ReduceOp::Max:
      reduce_kernel<<<blocks, kThreads, 0, stream>>>(dst, src, count, MaxOp{});
      break;
    case ReduceOp::Min:
      reduce_kernel<<<blocks, kThreads, 0, stream>>>(dst, src, count, MinOp{});
      break;
    default:
      ENGINE_FAIL("cuda::reduce_into: unknown reduce op ", static_cast<int>(op));
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void reduce_into(int device, float* dst, const float* src, int64_t count, ReduceOp op) {
  launch_reduce(device, dst, src, count, op);
}
void reduce_into(int device, double* dst, const double* src, int64_t count, ReduceOp op) {
  launch_reduce(device, dst, src, count, op);
}
void reduce_into(int device, int64_t* dst, const int64_t* src, int64_t count, ReduceOp op) {
  launch_reduce(device, dst, src, count, op);
}

void scale(int device, float* dst, int64_t count, float s) {
  ENGINE_CHECK(count >= 0, "cuda::scale: negative count ", count);
  if (count == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  scale_kernel<<<blocks_for(count), kThreads, 0, ::engine::cuda::compute_stream(device)>>>(
      dst, count, s);
  CUDA_CHECK_LAUNCH();
}

namespace detail {

void scale_or_zero(int device, float* dst, int64_t count, float beta) {
  ENGINE_CHECK(count >= 0, "cuda::scale_or_zero: negative count ", count);
  if (count == 0 || beta == 1.f) return;
  if (beta != 0.f) return scale(device, dst, count, beta);
  ::engine::cuda::DeviceGuard guard(device);
  CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(count) * sizeof(float),
                             ::engine::cuda::compute_stream(device)));
}

void channel_sum(int device, const float* x, float* out, int64_t n, int64_t c, int64_t hw,
                 float beta) {
  ENGINE_CHECK(n >= 0 && c > 0 && hw > 0 && c <= INT32_MAX, "cuda::channel_sum: bad shape (", n,
               ", ", c, ", ", hw, ")");
  ::engine::cuda::DeviceGuard guard(device);
  channel_sum_kernel<<<static_cast<unsigned>(c), kThreads, 0,
                       ::engine::cuda::compute_stream(device)>>>(x, out, n, c, hw, beta);
  CUDA_CHECK_LAUNCH();
}

}  // namespace detail
}  // namespace engine::kernels::cuda
