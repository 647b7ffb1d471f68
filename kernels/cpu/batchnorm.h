// kernels/cpu/batchnorm.h: batch_norm2d on CPU. x, y (N, C, HW); gamma, beta, running stats,
// mean, invstd (C). Per-channel sums are taken in double, in a fixed order.
#pragma once
#include "kernels/batchnorm.h"

namespace engine::kernels::cpu {

// Training: normalises with the batch statistics, writes mean and invstd (for the backward) and
// updates running_mean / running_var (unbiased) with momentum.
void batch_norm_train_forward(const float* x, const float* gamma, const float* beta, float* y,
                              float* mean, float* invstd, float* running_mean,
                              float* running_var, const BatchNormShape& s, float momentum,
                              float eps);
// Evaluation: normalises with the running statistics.
void batch_norm_eval_forward(const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y,
                             const BatchNormShape& s, float eps);
// Training-mode backward from the saved mean and invstd: dx (N, C, HW), dgamma, dbeta (C).
void batch_norm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* invstd, float* dx, float* dgamma, float* dbeta,
                         const BatchNormShape& s);

}  // namespace engine::kernels::cpu
