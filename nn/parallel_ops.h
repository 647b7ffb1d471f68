// nn/parallel_ops.h: the differentiable plumbing of single-process data parallelism (the
// autograd functions behind torch.nn.parallel's scatter and gather): a row range of a batch, a
// copy to another device, and the concatenation of per-device outputs on one device. Each records
// a Node when an input requires grad; gradients travel back to the input's own device.
#pragma once
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace engine::nn {

// Rows [start, start + length) of x (N, ...) along dim 0, sharing x's storage (no copy).
// Backward: a zero tensor of x's shape with the gradient in those rows.
Tensor narrow0(const Tensor& x, int64_t start, int64_t length);

// x copied onto device d (x itself when it is already there, as torch's Tensor.to).
// Backward: the gradient copied back to x's device.
Tensor to_device(const Tensor& x, Device d);

// The tensors (n_i, ...) - equal trailing shapes and dtype, on any devices - concatenated along
// dim 0 into one (sum n_i, ...) tensor on device d. Backward: each input gets its rows of the
// gradient, copied to its device.
Tensor cat0(const std::vector<Tensor>& xs, Device d);

}  // namespace engine::nn
