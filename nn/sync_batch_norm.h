// nn/sync_batch_norm.h: SyncBatchNorm (PyTorch's torch.nn.SyncBatchNorm, on the CPU): batch norm
// whose statistics are those of the global batch, every rank's images together.
//
// Forward, per layer, one sum across ranks of (2C + 1) floats:
//   local   s1[c] = sum (x - K[c]), s2[c] = sum (x - K[c])^2, n   (K: running_mean, equal on every
//           rank, a shift that keeps s2 - s1^2/n from cancelling)
//   reduce  s1, s2, n summed over ranks
//   then    mean = K + s1/n, var = s2/n - (s1/n)^2; y = (x - mean) / sqrt(var + eps) * gamma + beta
//           running_mean, running_var (unbiased, n / (n - 1)) updated from them: equal everywhere
// Backward, one sum of 2C floats: sum dy and sum dy (x - mean) over ranks give dx as one batch
// norm over the global batch would; dgamma and dbeta stay this rank's sums (the gradient
// synchronisation averages them, as every other parameter's).
// With a reducer set (set_batch_norm_sync), every BatchNorm2d in training mode runs this. CUDA
// tensors are computed on the host (copied there and back).
#pragma once
#include <functional>

#include "core/tensor.h"

namespace engine::nn {

// Sums a CPU float tensor in place across the ranks (an all_reduce); called in forward and
// backward, in the same order on every rank.
using BatchNormReducer = std::function<void(const Tensor& sums)>;

// The reducer BatchNorm2d layers use in training; an empty one turns SyncBatchNorm off.
// Process-wide, as set_matmul_precision: set it before training starts.
void set_batch_norm_sync(BatchNormReducer reducer);
const BatchNormReducer& batch_norm_sync();

// x (N, C, H, W); gamma, beta, running_mean, running_var (C). Training mode only.
Tensor sync_batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormReducer& reduce, float momentum = 0.1f, float eps = 1e-5f);

}  // namespace engine::nn
