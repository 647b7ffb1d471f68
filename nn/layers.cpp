// nn/layers.cpp: layer construction (PyTorch's default initialisation) and forward passes.
#include "nn/layers.h"

#include <cmath>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cuda/ops.h"
#include "kernels/dispatch.h"
#include "nn/chunked.h"
#include "nn/functional.h"
#include "nn/sync_batch_norm.h"

namespace engine::nn {
namespace {

// PyTorch's kaiming_uniform_(a = sqrt(5)) bound is 1/sqrt(fan_in); biases use the same bound.
Tensor uniform(const Shape& shape, float bound, Generator& gen) {
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = gen.uniform(-bound, bound);
  return Tensor::from_vector(v, shape);
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, Generator& gen) {
  float bound = 1.0f / std::sqrt(static_cast<float>(in));
  weight = register_parameter("weight", uniform({out, in}, bound, gen));
  bias = register_parameter("bias", uniform({out}, bound, gen));
}

Tensor Linear::forward(const Tensor& x) {
  return linear(x, weight, bias);
}
int64_t Linear::flops(const Tensor& x) const {
  return 2 * x.size(0) * weight.size(0) * weight.size(1);
}

Conv2d::Conv2d(int64_t cin, int64_t cout, int kernel, int stride, int padding, Generator& gen)
    : stride(stride), padding(padding) {
  float bound = 1.0f / std::sqrt(static_cast<float>(cin * kernel * kernel));
  weight = register_parameter("weight", uniform({cout, cin, kernel, kernel}, bound, gen));
  bias = register_parameter("bias", uniform({cout}, bound, gen));
}

Tensor Conv2d::forward(const Tensor& x) {
  if (pool_kernel_)
    return conv2d_pool(x, weight, bias, stride, padding, pool_kernel_, pool_stride_, pool_relu_);
  return conv2d(x, weight, bias, stride, padding);
}
void Conv2d::pool_output(int kernel, int stride, bool relu) {
  pool_kernel_ = kernel;
  pool_stride_ = stride;
  pool_relu_ = relu;
}
int64_t Conv2d::flops(const Tensor& x) const {
  int64_t k = weight.size(2);
  int64_t oh = (x.size(2) + 2 * padding - k) / stride + 1,
          ow = (x.size(3) + 2 * padding - k) / stride + 1;
  return 2 * x.size(0) * weight.size(0) * oh * ow * weight.size(1) * k * k;
}

BatchNorm2d::BatchNorm2d(int64_t c) {
  weight = register_parameter("weight", Tensor::full({c}, 1.0f));
  bias = register_parameter("bias", Tensor::zeros({c}));
  running_mean = register_buffer("running_mean", Tensor::zeros({c}));
  running_var = register_buffer("running_var", Tensor::full({c}, 1.0f));
  num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::I64));
}

void BatchNorm2d::count_batch() {
  if (!is_training()) return;
  // On the buffer's device: a GPU step reads nothing back for it (and a CUDA graph counts it).
  kernels::call(num_batches_tracked.device(), kernels::cpu::count_batch, kernels::cuda::count_batch,
                num_batches_tracked.data<int64_t>());
}
Tensor BatchNorm2d::forward(const Tensor& x) {
  count_batch();
  // SyncBatchNorm, and the world-invariant mode: the global batch's statistics.
  if (is_training() && (batch_norm_sync() || ChunkedGradients::current()))
    return sync_batch_norm2d(x, weight, bias, running_mean, running_var, batch_norm_sync());
  return batch_norm2d(x, weight, bias, running_mean, running_var, is_training());
}
Tensor BatchNorm2d::forward_pooled(const Tensor& x, int kernel, int stride, bool relu) {
  count_batch();
  if (is_training() && (batch_norm_sync() || ChunkedGradients::current())) {
    Tensor y = sync_batch_norm2d(x, weight, bias, running_mean, running_var, batch_norm_sync());
    return relu ? max_pool2d_relu(y, kernel, stride) : max_pool2d(y, kernel, stride);
  }
  return batch_norm2d_pool(x, weight, bias, running_mean, running_var, is_training(), kernel,
                           stride, relu);
}

Tensor ReLU::forward(const Tensor& x) {
  return relu(x);
}
Tensor MaxPool2d::forward(const Tensor& x) {
  if (bn) return bn->forward_pooled(x, kernel, stride, with_relu);
  return with_relu ? max_pool2d_relu(x, kernel, stride) : max_pool2d(x, kernel, stride);
}
Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p, is_training(), gen);
}
Tensor Dropout2d::forward(const Tensor& x) {
  return dropout2d(x, p, is_training(), gen);
}

Sequential& Sequential::add(std::shared_ptr<Module> m) {
  register_module(std::to_string(layers_.size()), m);
  auto* pool = dynamic_cast<MaxPool2d*>(m.get());
  size_t before = layers_.size();  // the layers [before, size) are taken into pool
  if (pool && before > 0 && dynamic_cast<ReLU*>(layers_[before - 1].get())) {
    pool->with_relu = true;
    before -= 1;
  }
  if (pool && before > 0) {
    pool->bn = dynamic_cast<BatchNorm2d*>(layers_[before - 1].get());
    if (pool->bn) before -= 1;
  }
  for (size_t i = before; pool && i < layers_.size(); ++i) fused_[i] = true;
  layers_.push_back(std::move(m));
  fused_.push_back(false);
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (!fused_[i]) y = (*layers_[i])(y);  // through operator(): traced and counted per layer
  return y;
}

}  // namespace engine::nn
