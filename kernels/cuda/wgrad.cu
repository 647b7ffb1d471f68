// kernels/cuda/wgrad.cu: the engine's weight gradient of conv2d and linear
// (CudaKernels::Engine), a GEMM with a long, fixed-order reduction (kernels/cuda/wgrad_plan.h has
// the plan). Pass 1, one block per (tile of dw, slice of positions): TM x TN outputs, each thread
// RM x RN of them, summed over the slice's positions in order, kWgradChunk at a time through shared
// memory; the blocks of the first column of tiles also sum dy over the slice (the bias gradient,
// output column k). Pass 2 adds the slices' partial sums in slice order (one block per 32 outputs:
// 8 rows of threads take every 8th slice, then thread row 0 adds the 8 in order). With one slice,
// pass 1 writes the results itself. No atomics: the same sums in the same order on every run.
// With Round (the bf16 layers) each operand is rounded to bf16 as it is loaded: the CPU's
// semantics (bf16 operands, fp32 sums) without a rounded copy.
#include <cuda_bf16.h>

#include "core/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/internal.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/wgrad_plan.h"

namespace engine::kernels::cuda {
namespace {

constexpr int kC = kWgradChunk;

template <bool Round>
__device__ __forceinline__ float load(float v) {
  if constexpr (Round) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

// Output (m, j) of dw (m, k), j == k being db[m]: out = beta * out + v.
__device__ __forceinline__ void store(float* dw, float* db, const WgradGeom& g, int m, int j,
                                      float v, float beta) {
  float* o = j < g.k ? dw + m * g.k + j : db + m;
  *o = wgrad_finish(beta == 0.f ? 0.f : *o, v, beta);
}

// partial (slices, m, k + 1): slice s's sums; with one slice, dw and db directly. db may be null.
template <int TM, int TN, int RM, int RN, bool Round>
__global__ void __launch_bounds__((TM / RM) * (TN / RN))
    wgrad_partial_kernel(const float* x, const float* dy, float* partial, float* dw, float* db,
                         WgradGeom g, float beta) {
  constexpr int kT = (TM / RM) * (TN / RN), kCols = TN / RN, kRows = TM / RM;
  __shared__ float sa[kC][TM + 1];  // dy[m0 + i, q]; + 1: the stores' banks differ
  __shared__ float sb[kC][TN + 1];  // col[j0 + i, q]
  const int m0 = blockIdx.x * TM, j0 = blockIdx.y * TN, tid = threadIdx.x;
  const int tm = tid / kCols, tn = tid - tm * kCols;
  const int q0 = blockIdx.z * g.slice_len, q1 = min(q0 + g.slice_len, g.q);
  const bool bias = db != nullptr && blockIdx.y == 0 && tn == 0;
  float acc[RM][RN] = {}, bacc[RM] = {};
  for (int qb = q0; qb < q1; qb += kC) {
    for (int e = tid; e < kC * TM; e += kT) {  // consecutive threads: consecutive positions
      const int i = e / kC, c = e - i * kC, q = qb + c;
      sa[c][i] = m0 + i < g.m && q < q1 ? load<Round>(wgrad_dy_at(dy, g, m0 + i, q)) : 0.f;
    }
    for (int e = tid; e < kC * TN; e += kT) {
      const int i = e / kC, c = e - i * kC, q = qb + c;
      sb[c][i] = j0 + i < g.k && q < q1 ? load<Round>(wgrad_x_at(x, g, j0 + i, q)) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      float a[RM], b[RN];
#pragma unroll
      for (int i = 0; i < RM; ++i) a[i] = sa[c][tm + i * kRows];
#pragma unroll
      for (int j = 0; j < RN; ++j) b[j] = sb[c][tn + j * kCols];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        bacc[i] += a[i];
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  const int stride = g.k + 1;
  float* part = partial + static_cast<int64_t>(blockIdx.z) * g.m * stride;
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int m = m0 + tm + i * kRows;
    if (m >= g.m) continue;
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const int col = j0 + tn + j * kCols;
      if (col >= g.k) continue;
      if (g.slices == 1)
        store(dw, db, g, m, col, acc[i][j], beta);
      else
        part[m * stride + col] = acc[i][j];
    }
    if (!bias) continue;
    if (g.slices == 1)
      store(dw, db, g, m, g.k, bacc[i], beta);
    else
      part[m * stride + g.k] = bacc[i];
  }
}

// out (m, k + 1) = the slices' sums in slice order; column k only when db is not null.
__global__ void __launch_bounds__(256)
    wgrad_reduce_kernel(const float* partial, float* dw, float* db, WgradGeom g, float beta) {
  __shared__ float rows[8][33];
  const int stride = g.k + 1, count = g.m * stride;
  const int lane = threadIdx.x & 31, row = threadIdx.x >> 5;
  const int o = blockIdx.x * 32 + lane, m = o / stride, j = o - m * stride;
  const bool wanted = o < count && (j < g.k || db != nullptr);  // column k: the bias, if asked
  float sum = 0.f;
  if (wanted)
    for (int s = row; s < g.slices; s += 8) sum += partial[static_cast<int64_t>(s) * count + o];
  rows[row][lane] = sum;
  __syncthreads();
  if (row != 0 || !wanted) return;
  float total = rows[0][lane];
  for (int r = 1; r < 8; ++r) total += rows[r][lane];
  store(dw, db, g, m, j, total, beta);
}

template <int TM, int TN, int RM, int RN, bool Round>
void launch_partial(const float* x, const float* dy, float* partial, float* dw, float* db,
                    const WgradGeom& g, float beta, cudaStream_t stream) {
  const dim3 grid((g.m + TM - 1) / TM, (g.k + TN - 1) / TN, g.slices);
  wgrad_partial_kernel<TM, TN, RM, RN, Round>
      <<<grid, (TM / RM) * (TN / RN), 0, stream>>>(x, dy, partial, dw, db, g, beta);
  CUDA_CHECK_LAUNCH();
}

// Pass 1 in the tile that wastes least: 64 x 64 when both sides pass 32, else 32 x 32.
template <bool Round>
void partial_pass(const float* x, const float* dy, float* partial, float* dw, float* db,
                  const WgradGeom& g, float beta, cudaStream_t stream) {
  if (g.m > 32 && g.k > 32)
    launch_partial<64, 64, 4, 4, Round>(x, dy, partial, dw, db, g, beta, stream);
  else
    launch_partial<32, 32, 2, 2, Round>(x, dy, partial, dw, db, g, beta, stream);
}

void check_sizes(const WgradGeom& g, int64_t x_count, int64_t y_count, const char* what) {
  const int64_t partial = static_cast<int64_t>(g.slices) * g.m * (g.k + 1);
  ENGINE_CHECK(x_count < INT32_MAX && y_count < INT32_MAX && partial < INT32_MAX, what,
               ": over 2^31 elements for the engine's weight gradient");
  ENGINE_CHECK(g.slices <= 65535, what, ": ", g.slices, " slices over the grid's limit");
}

}  // namespace

namespace detail {

void engine_wgrad(int device, const float* x, const float* dy, float* dw, float* db,
                  const WgradGeom& g, float beta, bool round_bf16) {
  ::engine::cuda::DeviceGuard guard(device);
  if (g.q == 0) {  // no samples: beta * dw (zeros when beta is 0), as the CPU
    scale_or_zero(device, dw, static_cast<int64_t>(g.m) * g.k, beta);
    if (db) scale_or_zero(device, db, g.m, beta);
    return;
  }
  cudaStream_t stream = ::engine::cuda::compute_stream(device);
  const int64_t count = static_cast<int64_t>(g.m) * (g.k + 1);
  DeviceBlock partial(device, g.slices > 1 ? g.slices * count * sizeof(float) : 0);
  float* p = static_cast<float*>(partial.get());
  if (round_bf16)
    partial_pass<true>(x, dy, p, dw, db, g, beta, stream);
  else
    partial_pass<false>(x, dy, p, dw, db, g, beta, stream);
  if (g.slices == 1) return;
  wgrad_reduce_kernel<<<static_cast<unsigned>((count + 31) / 32), 256, 0, stream>>>(p, dw, db, g,
                                                                                    beta);
  CUDA_CHECK_LAUNCH();
}

void engine_conv2d_wgrad(int device, const float* x, const float* dy, float* dw, float* db,
                         const Conv2dShape& s, float beta, bool round_bf16) {
  const WgradGeom g = wgrad_geom(s);
  check_sizes(g, s.x_count(), s.y_count(), "cuda::conv2d_backward_weight (engine)");
  engine_wgrad(device, x, dy, dw, db, g, beta, round_bf16);
}

void engine_linear_wgrad(int device, const float* dy, const float* x, float* dw,
                         const LinearShape& s, float beta, bool round_bf16) {
  const WgradGeom g = wgrad_geom(s);
  check_sizes(g, s.n * s.in, s.n * s.out, "cuda::linear_backward_weight (engine)");
  engine_wgrad(device, x, dy, dw, nullptr, g, beta, round_bf16);
}

}  // namespace detail
}  // namespace engine::kernels::cuda
