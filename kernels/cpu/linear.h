// kernels/cpu/linear.h: CPU fully connected layer, forward and backward, on OpenBLAS sgemm.
#pragma once
#include "kernels/linear.h"

namespace engine::kernels::cpu {

// y (N, out) = x (N, in) w^T (in, out) + b (out); b may be null.
void linear_forward(const float* x, const float* w, const float* b, float* y, const LinearShape& s);

// dx (N, in) = dy (N, out) w (out, in). Overwrites dx.
void linear_backward_data(const float* dy, const float* w, float* dx, const LinearShape& s);

// dw (out, in) = beta * dw + dy^T (out, N) x (N, in). beta 0 overwrites (dw not read).
void linear_backward_weight(const float* dy, const float* x, float* dw, const LinearShape& s,
                            float beta);

// db (out) = beta * db + sum over N of dy (N, out). beta 0 overwrites. Fixed order.
void linear_backward_bias(const float* dy, float* db, const LinearShape& s, float beta);

}  // namespace engine::kernels::cpu
