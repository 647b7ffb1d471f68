// kernels/cpu/batchnorm.h: CPU 2-d batch normalisation, train and eval, forward and backward,
// with torch.nn.BatchNorm2d's semantics. x (N, C, HW); per-channel sums in double.
// gamma/beta null mean affine=False (1 and 0); running stats null mean track_running_stats=False.
#pragma once
#include "kernels/batchnorm.h"

namespace engine::kernels::cpu {

// Batch statistics: y = (x - mean) * invstd * gamma + beta with the biased variance; saves
// mean and invstd (C) for backward; running_mean/var = momentum * batch + (1 - momentum) * old,
// with the unbiased variance. Needs N*HW > 1.
void batch_norm_train_forward(const float* x, const float* gamma, const float* beta, float* y,
                              float* save_mean, float* save_invstd, float* running_mean,
                              float* running_var, const BatchNormShape& s, float momentum,
                              float eps);

// batch_norm_train_forward's statistics and running update alone, for a caller that applies the
// affine itself (max_pool2d_affine_forward).
void batch_norm_train_stats(const float* x, float* save_mean, float* save_invstd,
                            float* running_mean, float* running_var, const BatchNormShape& s,
                            float momentum, float eps);
// Running statistics: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta.
void batch_norm_eval_forward(const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y,
                             const BatchNormShape& s, float eps);

// Gradients of batch_norm_train_forward from its saved mean and invstd. Overwrites dx, dgamma,
// dbeta; any of the three may be null (not wanted).
void batch_norm_backward(const float* dy, const float* x, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta, const BatchNormShape& s);

// Gradients of batch_norm_eval_forward (the statistics are constants). Same conventions.
void batch_norm_eval_backward(const float* dy, const float* x, const float* gamma,
                              const float* running_mean, const float* running_var, float* dx,
                              float* dgamma, float* dbeta, const BatchNormShape& s, float eps);
// n[0] += 1: a training batch counted into num_batches_tracked (int64, one element).
void count_batch(int64_t* n);

}  // namespace engine::kernels::cpu
