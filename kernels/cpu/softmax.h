// kernels/cpu/softmax.h: CPU log-softmax over the last dim of (N, C), NLL loss (mean reduction,
// int64 targets), cross entropy = log-softmax + NLL fused, argmax per row and accuracy.
#pragma once
#include <cstdint>

#include "kernels/softmax.h"

namespace engine::kernels::cpu {

// y (N, C) = x - max - log(sum(exp(x - max))) per row. y may alias x.
void log_softmax_forward(const float* x, float* y, int64_t n, int64_t c);
// dx (N, C) = dy - exp(y) * sum_row(dy), y the forward output. dx may alias dy.
void log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n, int64_t c);

// Throws engine::Error naming the first target outside [0, C) (index and value).
void check_targets(const int64_t* target, int64_t n, int64_t c, const char* what);

// *loss = mean_i -logp[i, target[i]] over N rows; NaN for N = 0 (torch's mean of nothing).
void nll_loss_forward(const float* logp, const int64_t* target, float* loss, int64_t n, int64_t c);
// dlogp (N, C) = gradient of *dloss * loss: -*dloss/N at each target, 0 elsewhere. Overwrites.
void nll_loss_backward(const float* dloss, const int64_t* target, float* dlogp, int64_t n,
                       int64_t c);

// The batch-invariant forms (a sample's numbers do not depend on the N of the call): loss[i] =
// -logp[i, target[i]], for a caller that sums over the global batch itself; and the gradients
// with the scale given (dloss / B for a mean over a global batch of B; the functions above take
// dloss / N of the call's N, which a rank's share of the batch does not know).
void nll_loss_per_sample(const float* logp, const int64_t* target, float* loss, int64_t n,
                         int64_t c);
// dlogp (N, C) = -scale at each target, 0 elsewhere. Overwrites.
void nll_loss_backward_scaled(float scale, const int64_t* target, float* dlogp, int64_t n,
                              int64_t c);
// dx (N, C) = (softmax - onehot(target)) * scale, from the saved logp. Overwrites.
void cross_entropy_backward_scaled(float scale, const float* logp, const int64_t* target, float* dx,
                                   int64_t n, int64_t c);

// Cross entropy of logits x (N, C): writes logp = log_softmax(x) (kept for backward) and
// returns nll_loss(logp, target).
float cross_entropy_forward(const float* x, const int64_t* target, float* logp, int64_t n,
                            int64_t c);
// dx (N, C) = (softmax - onehot(target)) * dloss / N, from the saved logp. Overwrites.
void cross_entropy_backward(float dloss, const float* logp, const int64_t* target, float* dx,
                            int64_t n, int64_t c);

// out[i] = first index of row i's maximum (NaN counts as maximum), as torch.argmax(dim=1).
void argmax_rows(const float* x, int64_t n, int64_t c, int64_t* out);
// Rows whose argmax equals target.
int64_t accuracy_count(const float* x, const int64_t* target, int64_t n, int64_t c);

}  // namespace engine::kernels::cpu
