// nn/module.h: Module, the base of layers and models: named parameters, buffers and children
// whose dotted names equal PyTorch's state_dict keys for the same model, and train/eval mode.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace engine::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Counts the training work of the layers run while it lives (any thread): each layer's forward
// flops x 3 (forward, input gradient, weight gradient), x 2 where its input needs no gradient
// (a first layer), as the "work per image" counts them. One at a time.
class FlopCount {
 public:
  FlopCount();
  ~FlopCount();
  FlopCount(const FlopCount&) = delete;
  FlopCount& operator=(const FlopCount&) = delete;
  int64_t total() const;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  // Runs forward; with tracing on, as one event named after the module ("conv1", "layer1.0").
  Tensor operator()(const Tensor& x);
  // Floating-point operations of one forward on x (multiply-adds count 2); 0 when not counted.
  virtual int64_t flops(const Tensor& x) const { return 0; }

  // Recursive, in PyTorch's state_dict order: own entries first, then each child's.
  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  NamedTensors state_dict() const;  // parameters and buffers interleaved as PyTorch orders them
  std::vector<Tensor> parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer to d (parameters stay leaves that require grad).
  void to(Device d);
  // Clears the gradients of every parameter (set to undefined, like set_to_none=True).
  void zero_grad();

 protected:
  // Return handles that stay valid for the module's life (to() moves storage, not the tensor).
  Tensor register_parameter(const std::string& name, Tensor t);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    m->set_path(path_.empty() ? name : path_ + "." + name);
    return m;
  }

 private:
  void set_path(const std::string& path);
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors* out) const;

  // Params and buffers keep registration order; state_dict lists params then buffers per module.
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::string path_;  // dotted name inside the model, for traces
};

}  // namespace engine::nn
