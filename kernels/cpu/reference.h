// kernels/cpu/reference.h: reference implementations for checks. Plain loops, no tricks, sums in
// double; slow on purpose. The kernel tests and the kernel benchmarks compare against these.
#pragma once
#include <cstdint>

#include "kernels/batchnorm.h"
#include "kernels/cpu/conv2d/reference.h"
#include "kernels/linear.h"
#include "kernels/optim.h"
#include "kernels/pool.h"

namespace engine::kernels::ref {

// The convolution's references: kernels/cpu/conv2d/reference.h (included above).

// x (N, in), w (out, in), b (out) or null, y (N, out); backward overwrites dx, dw, db.
void linear_forward(const float* x, const float* w, const float* b, float* y, const LinearShape& s);
void linear_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                     float* db, const LinearShape& s);

// x (N, C, H, W) -> y (N, C, OH, OW), arg: index of the max within its (H, W) plane.
void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s);
void max_pool2d_backward(const float* dy, const int32_t* arg, float* dx, const Pool2dShape& s);

void relu_forward(const float* x, float* y, int64_t count);
void relu_backward(const float* dy, const float* y, float* dx, int64_t count);

// Element i kept when philox_uniform(seed, offset, i) >= p; dropout2d draws per plane (n, c).
void dropout_forward(const float* x, float* y, int64_t count, float p, uint64_t seed,
                     uint64_t offset);
void dropout2d_forward(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                       uint64_t seed, uint64_t offset);

// x (N, C, HW). Train: batch statistics; writes mean, invstd (C) and updates running stats
// when they are non-null. gamma/beta null mean 1/0.
void batch_norm_train_forward(const float* x, const float* gamma, const float* beta, float* y,
                              float* mean, float* invstd, float* running_mean, float* running_var,
                              const BatchNormShape& s, float momentum, float eps);
void batch_norm_eval_forward(const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y,
                             const BatchNormShape& s, float eps);
// Train-mode gradients, recomputing the batch statistics of x; dgamma/dbeta may be null.
void batch_norm_backward(const float* dy, const float* x, const float* gamma, float* dx,
                         float* dgamma, float* dbeta, const BatchNormShape& s, float eps);

// x, y (N, C): log-softmax over C.
void log_softmax_forward(const float* x, float* y, int64_t n, int64_t c);
void log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n, int64_t c);
// Mean over N of -logp[i, target[i]]; the gradient of dloss * loss w.r.t. logp.
float nll_loss_forward(const float* logp, const int64_t* target, int64_t n, int64_t c);
void nll_loss_backward(float dloss, const int64_t* target, float* dlogp, int64_t n, int64_t c);

void argmax_rows(const float* x, int64_t n, int64_t c, int64_t* out);

// One optimizer step over count elements, straight from torch.optim's formulas in double.
void sgd_step(float* p, const float* g, float* buf, int64_t count, const SgdConfig& c, bool first);
void adam_step(float* p, const float* g, float* m, float* v, int64_t count, const AdamConfig& c,
               int64_t step);

double sum(const float* x, int64_t count);

// ---- check helpers shared by the kernel tests and benchmarks ----

// x[i] = lo + (hi - lo) * philox_uniform(seed, 0, i): the same values on every machine.
void fill_uniform(float* x, int64_t count, uint64_t seed, float lo = -1.f, float hi = 1.f);

// max_i |got[i] - want[i]| / max(max_i |want[i]|, tiny): error relative to the data's scale.
// NaN in the same places counts as equal; NaN in only one of them gives infinity.
double max_rel_error(const float* got, const float* want, int64_t count);

}  // namespace engine::kernels::ref
