// nn/layers.h: the layers of the tutorials' models, initialised as PyTorch initialises them
// (kaiming-uniform a = sqrt(5) weights, biases uniform in +-1/sqrt(fan_in)).
#pragma once
#include <memory>
#include <vector>

#include "core/rng.h"
#include "nn/module.h"

namespace engine::nn {

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, Generator& gen);
  Tensor forward(const Tensor& x) override;  // (N, in) -> (N, out)
  int64_t flops(const Tensor& x) const override;
  Tensor weight, bias;  // (out, in), (out)
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t cin, int64_t cout, int kernel, int stride, int padding, Generator& gen);
  // (N, Cin, H, W) -> (N, Cout, OH, OW); after pool_output, that max-pooled (conv2d_pool).
  Tensor forward(const Tensor& x) override;
  int64_t flops(const Tensor& x) const override;
  // Makes forward return max_pool2d (relu: relu of it) of the convolution, as one op: for a model
  // whose next layer is that pool.
  void pool_output(int kernel, int stride, bool relu);
  Tensor weight, bias;  // (Cout, Cin, K, K), (Cout)
  int stride, padding;

 private:
  int pool_kernel_ = 0, pool_stride_ = 0;  // 0: no pool
  bool pool_relu_ = false;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels);
  Tensor forward(const Tensor& x) override;
  // max_pool2d (relu: max_pool2d_relu) of forward(x) as one op (batch_norm2d_pool).
  Tensor forward_pooled(const Tensor& x, int kernel, int stride, bool relu);
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  void count_batch();  // num_batches_tracked += 1 in training
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

class MaxPool2d : public Module {
 public:
  MaxPool2d(int kernel, int stride) : kernel(kernel), stride(stride) {}
  // relu(max_pool2d(x)) when with_relu; of bn->forward(x) when bn is set.
  Tensor forward(const Tensor& x) override;
  int kernel, stride;
  bool with_relu = false;     // set by Sequential on a MaxPool2d that follows a ReLU
  BatchNorm2d* bn = nullptr;  // set by Sequential on one that follows a BatchNorm2d (and ReLU)
};

class Dropout : public Module {
 public:
  Dropout(float p, Generator& gen) : p(p), gen(gen) {}
  Tensor forward(const Tensor& x) override;
  float p;
  Generator& gen;
};

class Dropout2d : public Module {
 public:
  Dropout2d(float p, Generator& gen) : p(p), gen(gen) {}
  Tensor forward(const Tensor& x) override;
  float p;
  Generator& gen;
};

class Sequential : public Module {
 public:
  // Children are named "0", "1", ... as in PyTorch. A MaxPool2d added right after a ReLU takes
  // the ReLU in (max_pool2d_relu, one pass; equal since relu is monotone), and a BatchNorm2d
  // right before them (or right before it) too (batch_norm2d_pool): forward skips the layers
  // taken in. Parameters, buffers and names stay where they were.
  Sequential& add(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
  std::vector<bool> fused_;  // layers_[i] is run by a later layer (a MaxPool2d)
};

}  // namespace engine::nn
