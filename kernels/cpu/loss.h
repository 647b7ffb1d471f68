// kernels/cpu/loss.h: log_softmax, nll_loss (mean) and argmax over rows of (N, C), on CPU.
#pragma once
#include <cstdint>

namespace engine::kernels::cpu {

void log_softmax_forward(const float* x, float* y, int64_t n, int64_t c);
// dx = dy - exp(y) * sum(dy) per row, y the forward output.
void log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n, int64_t c);
// mean over rows of -logp[i, target[i]]; throws engine::Error naming the row of a bad target.
float nll_loss_forward(const float* logp, const int64_t* target, int64_t n, int64_t c);
// dlogp[i, j] = -dloss / n at j = target[i], else 0.
void nll_loss_backward(float dloss, const int64_t* target, float* dlogp, int64_t n, int64_t c);
void argmax_rows(const float* x, int64_t n, int64_t c, int64_t* out);

}  // namespace engine::kernels::cpu
