// nn/functional.h: the differentiable ops. Each computes its forward with kernels/ (dispatching on
// the tensors' device), and, when an input requires grad, records a Node whose backward calls the
// matching backward kernels. Shapes follow PyTorch (NCHW images, (N, C) logits).
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"

namespace engine::nn {

// x (N, in), w (out, in), b (out) or undefined -> (N, out)
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// x (N, Cin, H, W), w (Cout, Cin, KH, KW), b (Cout) or undefined -> (N, Cout, OH, OW)
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding);
// max_pool2d(conv2d(x, w, b, stride, padding), kernel, pool_stride) (relu: max_pool2d_relu of it)
// as one op. On the CPU a one-channel input (a model's first layer) is pooled by the kernel that
// computed it, block by block in cache: the convolution's output is never written. Elsewhere the
// two ops. The same values and gradients as the two ops.
Tensor conv2d_pool(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding,
                   int kernel, int pool_stride, bool relu);
// x (N, C, H, W) -> (N, C, (H-k)/s+1, (W-k)/s+1)
Tensor max_pool2d(const Tensor& x, int kernel, int stride);
// relu(max_pool2d(x, kernel, stride)) in one pass; equal to max_pool2d(relu(x)) (relu is
// monotone), gradient included.
Tensor max_pool2d_relu(const Tensor& x, int kernel, int stride);
Tensor relu(const Tensor& x);
// Zeroes each element with probability p and scales the rest by 1/(1-p); identity unless training.
Tensor dropout(const Tensor& x, float p, bool training, Generator& gen);
// x (N, C, H, W): zeroes whole channels (n, c) with probability p.
Tensor dropout2d(const Tensor& x, float p, bool training, Generator& gen);
// x (N, C, H, W); gamma, beta (C); running_mean, running_var (C) updated in training mode
// (momentum 0.1, unbiased variance); eval mode normalises with the running statistics.
Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    float momentum = 0.1f, float eps = 1e-5f);
// max_pool2d(batch_norm2d(x, ...), kernel, stride) (relu: max_pool2d_relu of it) as one op: on
// the CPU the forward never writes the normalised tensor (the affine is applied inside the pooling
// pass); the backward and CUDA run the two ops' kernels. Same values and gradients as the two ops.
Tensor batch_norm2d_pool(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var, bool training,
                         int kernel, int stride, bool relu, float momentum = 0.1f,
                         float eps = 1e-5f);
// Same storage, new shape; one dimension may be -1.
Tensor reshape(const Tensor& x, Shape shape);
// x (N, ...) -> (N, prod(...))
Tensor flatten(const Tensor& x);
// x (N, C) -> log softmax over C
Tensor log_softmax(const Tensor& x);
// logp (N, C), target (N) int64 -> scalar mean of -logp[n, target[n]]
Tensor nll_loss(const Tensor& logp, const Tensor& target);
// logits (N, C), target (N) -> scalar mean cross-entropy (log_softmax then nll_loss)
Tensor cross_entropy(const Tensor& logits, const Tensor& target);
// x (N, C) -> (N) int64 index of the largest entry per row (first on ties)
Tensor argmax(const Tensor& x);
// How many rows of scores (N, C) have their argmax equal to target (N).
int64_t correct_count(const Tensor& scores, const Tensor& target);

}  // namespace engine::nn
