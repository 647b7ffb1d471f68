// nn/optim.h: optimizers with torch.optim semantics (SGD with momentum, dampening, nesterov and
// weight decay; Adam). Per-element math lives in kernels/optim.h, shared with CUDA.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/optim.h"
#include "nn/module.h"

namespace engine::nn {

class Optimizer {
 public:
  // params: (name, parameter) pairs; names key the saved state ("<name>.momentum_buffer").
  explicit Optimizer(NamedTensors params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  // Applies one update to every parameter that has a gradient.
  virtual void step() = 0;
  void zero_grad();
  int64_t steps() const { return steps_; }
  // A step taken on the device without step() (a replayed CUDA graph, parallel/step_graph.h).
  void count_replayed_step() { ++steps_; }
  // The (name, parameter) pairs it updates, in order.
  const NamedTensors& params() const { return params_; }
  // The optimizer's state as named tensors (for training checkpoints) and back.
  virtual NamedTensors state() const = 0;
  virtual void load_state(const NamedTensors& state, int64_t steps) = 0;

 protected:
  NamedTensors params_;
  int64_t steps_ = 0;
};

class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, kernels::SgdConfig cfg);
  void step() override;
  NamedTensors state() const override;
  void load_state(const NamedTensors& state, int64_t steps) override;
  const kernels::SgdConfig& config() const { return cfg_; }

 private:
  kernels::SgdConfig cfg_;
  std::vector<Tensor> momentum_;  // per parameter; undefined until its first step
};

class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, kernels::AdamConfig cfg);
  void step() override;
  NamedTensors state() const override;
  void load_state(const NamedTensors& state, int64_t steps) override;

 private:
  kernels::AdamConfig cfg_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace engine::nn
