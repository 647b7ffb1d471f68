// kernels/cuda/ops.h: the CUDA kernels, one function per CPU kernel of kernels/cpu with the same
// arguments plus the device first (kernels/dispatch.h's kernels::call picks one of the two).
// Pointers are device memory of `device`; every call is queued on that device's compute stream
// (core/cuda/stream.cuh) and returns without waiting, except where said. Plain C++: nn includes it.
// In a build without CUDA each function is an inline stub that throws engine::Error, so callers
// need no #ifdef.
#pragma once
#include <cstdint>

#include "core/error.h"
#include "kernels/batchnorm.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"

namespace engine::kernels::cuda {

#ifdef ENGINE_WITH_CUDA
#define ENGINE_CUDA_OP(...) __VA_ARGS__;
#else
[[noreturn]] inline void not_built(const char* fn) {
  ENGINE_FAIL("kernels::cuda::", fn, ": CUDA is not built in (configure with -DENGINE_CUDA=ON)");
}
#define ENGINE_CUDA_OP(...) \
  inline __VA_ARGS__ {      \
    not_built(__func__);    \
  }
#endif

// ---- linear (cuBLAS SGEMM; row-major operands read as transposed column-major, no copies) ----
// y (N, out) = x (N, in) w^T + b (out); b may be null.
ENGINE_CUDA_OP(void linear_forward(int device, const float* x, const float* w, const float* b,
                                   float* y, const LinearShape& s))
// dx (N, in) = dy (N, out) w (out, in). Overwrites dx.
ENGINE_CUDA_OP(void linear_backward_data(int device, const float* dy, const float* w, float* dx,
                                         const LinearShape& s))
// dw (out, in) = beta * dw + dy^T x.
ENGINE_CUDA_OP(void linear_backward_weight(int device, const float* dy, const float* x, float* dw,
                                           const LinearShape& s, float beta))
// db (out) = beta * db + sum over N of dy; deterministic (fixed-order block reduction).
ENGINE_CUDA_OP(void linear_backward_bias(int device, const float* dy, float* db,
                                         const LinearShape& s, float beta))

// ---- conv2d (cuDNN, algorithm found once per shape and cached; FMA math, no TF32) ----
ENGINE_CUDA_OP(void conv2d_forward(int device, const float* x, const float* w, const float* b,
                                   float* y, const Conv2dShape& s))
ENGINE_CUDA_OP(void conv2d_backward_input(int device, const float* dy, const float* w, float* dx,
                                          const Conv2dShape& s))
// dw = beta * dw + weight gradient; when db is not null, db = beta * db + bias gradient too.
ENGINE_CUDA_OP(void conv2d_backward_weight(int device, const float* x, const float* dy, float* dw,
                                           float* db, const Conv2dShape& s, float beta))
// db (Cout) = beta * db + sum over N, OH, OW of dy; deterministic.
ENGINE_CUDA_OP(void conv2d_backward_bias(int device, const float* dy, float* db,
                                         const Conv2dShape& s, float beta))

// ---- the same layers in bf16 (bf16 precision; kernels/cpu/bf16_ops.h has the contract:
// bf16-rounded operands, fp32 accumulation, fp32 results; kernels/cuda/bf16_ops.cu the how) ----
ENGINE_CUDA_OP(void linear_forward_bf16(int device, const float* x, const float* w, const float* b,
                                        float* y, const LinearShape& s))
ENGINE_CUDA_OP(void linear_backward_data_bf16(int device, const float* dy, const float* w,
                                              float* dx, const LinearShape& s))
ENGINE_CUDA_OP(void linear_backward_weight_bf16(int device, const float* dy, const float* x,
                                                float* dw, const LinearShape& s, float beta))
ENGINE_CUDA_OP(void conv2d_forward_bf16(int device, const float* x, const float* w, const float* b,
                                        float* y, const Conv2dShape& s))
ENGINE_CUDA_OP(void conv2d_backward_input_bf16(int device, const float* dy, const float* w,
                                               float* dx, const Conv2dShape& s))
ENGINE_CUDA_OP(void conv2d_backward_weight_bf16(int device, const float* x, const float* dy,
                                                float* dw, float* db, const Conv2dShape& s,
                                                float beta))

// ---- elementwise ----
ENGINE_CUDA_OP(void relu_forward(int device, const float* x, float* y, int64_t count))
ENGINE_CUDA_OP(void relu_backward(int device, const float* dy, const float* y, float* dx,
                                  int64_t count))
// Same masks as kernels/cpu/dropout.h for the same (seed, offset).
ENGINE_CUDA_OP(void dropout_forward(int device, const float* x, float* y, int64_t count, float p,
                                    uint64_t seed, uint64_t offset))
ENGINE_CUDA_OP(void dropout_backward(int device, const float* dy, float* dx, int64_t count, float p,
                                     uint64_t seed, uint64_t offset))
// The same, keeping mask[i] = 1 if kept else 0 (count bytes) for the backward.
ENGINE_CUDA_OP(void dropout_forward_mask(int device, const float* x, float* y, uint8_t* mask,
                                         int64_t count, float p, uint64_t seed, uint64_t offset))
ENGINE_CUDA_OP(void dropout_backward_mask(int device, const float* dy, const uint8_t* mask,
                                          float* dx, int64_t count, float p))
ENGINE_CUDA_OP(void dropout2d_forward(int device, const float* x, float* y, int64_t planes,
                                      int64_t plane_size, float p, uint64_t seed, uint64_t offset))
ENGINE_CUDA_OP(void dropout2d_backward(int device, const float* dy, float* dx, int64_t planes,
                                       int64_t plane_size, float p, uint64_t seed, uint64_t offset))
// By global position: element (plane) i of the call draws as first + i (kernels/cpu/dropout.h).
ENGINE_CUDA_OP(void dropout_forward_at(int device, const float* x, float* y, int64_t count, float p,
                                       uint64_t seed, uint64_t offset, uint64_t first))
ENGINE_CUDA_OP(void dropout_backward_at(int device, const float* dy, float* dx, int64_t count,
                                        float p, uint64_t seed, uint64_t offset, uint64_t first))
ENGINE_CUDA_OP(void dropout_forward_mask_at(int device, const float* x, float* y, uint8_t* mask,
                                            int64_t count, float p, uint64_t seed, uint64_t offset,
                                            uint64_t first))
ENGINE_CUDA_OP(void dropout2d_forward_at(int device, const float* x, float* y, int64_t planes,
                                         int64_t plane_size, float p, uint64_t seed,
                                         uint64_t offset, uint64_t first_plane))
ENGINE_CUDA_OP(void dropout2d_backward_at(int device, const float* dy, float* dx, int64_t planes,
                                          int64_t plane_size, float p, uint64_t seed,
                                          uint64_t offset, uint64_t first_plane))

// ---- max pooling: arg (N, C, OH, OW) int32 (DType::I32) index within the (H, W) plane ----
ENGINE_CUDA_OP(void max_pool2d_forward(int device, const float* x, float* y, int32_t* arg,
                                       const Pool2dShape& s))
// relu(max_pool2d(x)) in one pass, and its backward (y its output), as kernels/cpu/pool.h.
ENGINE_CUDA_OP(void max_pool2d_relu_forward(int device, const float* x, float* y, int32_t* arg,
                                            const Pool2dShape& s))
ENGINE_CUDA_OP(void max_pool2d_relu_backward(int device, const float* dy, const float* y,
                                             const int32_t* arg, float* dx, const Pool2dShape& s))
// Overwrites dx; each input gathers from the windows covering it (no
// atomics: deterministic).
ENGINE_CUDA_OP(void max_pool2d_backward(int device, const float* dy, const int32_t* arg, float* dx,
                                        const Pool2dShape& s))

// ---- batch norm (one block per channel, sums in double by a fixed tree) ----
ENGINE_CUDA_OP(void batch_norm_train_forward(int device, const float* x, const float* gamma,
                                             const float* beta, float* y, float* save_mean,
                                             float* save_invstd, float* running_mean,
                                             float* running_var, const BatchNormShape& s,
                                             float momentum, float eps))
ENGINE_CUDA_OP(void batch_norm_eval_forward(int device, const float* x, const float* gamma,
                                            const float* beta, const float* running_mean,
                                            const float* running_var, float* y,
                                            const BatchNormShape& s, float eps))
// dx, dgamma, dbeta may each be null (not wanted).
ENGINE_CUDA_OP(void batch_norm_backward(int device, const float* dy, const float* x,
                                        const float* gamma, const float* save_mean,
                                        const float* save_invstd, float* dx, float* dgamma,
                                        float* dbeta, const BatchNormShape& s))
// n[0] += 1 (int64, one element), for num_batches_tracked: no host read.
ENGINE_CUDA_OP(void count_batch(int device, int64_t* n))

// ---- rows of (N, C): log-softmax, NLL loss (mean), argmax ----
ENGINE_CUDA_OP(void log_softmax_forward(int device, const float* x, float* y, int64_t n, int64_t c))
ENGINE_CUDA_OP(void log_softmax_backward(int device, const float* dy, const float* y, float* dx,
                                         int64_t n, int64_t c))
// *loss (device scalar) = mean_i -logp[i, target[i]] (0 for N = 0). No host wait: a target
// outside [0, c) is never read through and makes the loss NaN (the CPU kernel throws instead).
ENGINE_CUDA_OP(void nll_loss_forward(int device, const float* logp, const int64_t* target,
                                     float* loss, int64_t n, int64_t c))
// dlogp = -(*dloss)/N at each target, 0 elsewhere; dloss is a device scalar (no host sync).
ENGINE_CUDA_OP(void nll_loss_backward(int device, const float* dloss, const int64_t* target,
                                      float* dlogp, int64_t n, int64_t c))
ENGINE_CUDA_OP(void argmax_rows(int device, const float* x, int64_t n, int64_t c, int64_t* out))

// ---- optimizers: coefficients on the host (kernels/optim.h), one update per element ----
ENGINE_CUDA_OP(void sgd_step(int device, float* param, const float* grad, float* buf, int64_t count,
                             const SgdConfig& c, bool first))
ENGINE_CUDA_OP(void adam_step(int device, float* param, const float* grad, float* m, float* v,
                              int64_t count, const AdamConfig& c, int64_t step))
// Fused multi-tensor forms (kernels/optim.h OptimTensor): every tensor in one launch (up to 32
// per launch), the table in the kernel's parameters. Not yet run on a GPU: nn/optim uses them
// only with kernels::cuda_kernels() == Engine (CudaKernels::Engine).
ENGINE_CUDA_OP(void sgd_step_multi(int device, const OptimTensor* ts, int64_t n,
                                   const SgdConfig& c))
ENGINE_CUDA_OP(void adam_step_multi(int device, const OptimTensor* ts, int64_t n,
                                    const AdamConfig& c, int64_t step))

// ---- collective reduction steps: dst[i] = op(dst[i], src[i]); dst[i] *= s ----
ENGINE_CUDA_OP(void reduce_into(int device, float* dst, const float* src, int64_t count,
                                ReduceOp op))
ENGINE_CUDA_OP(void reduce_into(int device, double* dst, const double* src, int64_t count,
                                ReduceOp op))
ENGINE_CUDA_OP(void reduce_into(int device, int64_t* dst, const int64_t* src, int64_t count,
                                ReduceOp op))
ENGINE_CUDA_OP(void scale(int device, float* dst, int64_t count, float s))

// ---- non-finite numbers (kernels/cpu/finite.h): flag[0] = 1 if any x is inf or NaN ----
ENGINE_CUDA_OP(void flag_nonfinite(int device, const float* x, int64_t count, float* flag))
ENGINE_CUDA_OP(void finite_seed(int device, const float* loss, float* seed))

// ---- gather (kernels/gather.h): dst (n, row_numel) = table[idx[i]]; idx on the device ----
ENGINE_CUDA_OP(void gather_rows_f32(int device, const float* table, int64_t row_numel,
                                    const int64_t* idx, int64_t n, float* dst))
ENGINE_CUDA_OP(void gather_rows_i64(int device, const int64_t* table, int64_t row_numel,
                                    const int64_t* idx, int64_t n, int64_t* dst))

#undef ENGINE_CUDA_OP

}  // namespace engine::kernels::cuda
