// nn/lambda_node.h: the autograd node of nn's differentiable ops: a backward given as a lambda
// over saved tensors (functional.cpp, parallel_ops.cpp).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/tensor.h"

namespace engine::nn::detail {

// A Node whose backward is fn: grad of the output -> grads of the inputs (undefined = none).
template <class Fn>
class LambdaNode : public Node {
 public:
  LambdaNode(const char* name, Fn fn) : name_(name), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const Tensor& g) override { return fn_(g); }
  std::string name() const override { return name_; }

 private:
  const char* name_;
  Fn fn_;
};

// Makes out's grad_fn a LambdaNode over inputs, when any of them requires grad.
template <class Fn>
void record(Tensor& out, const char* name, const std::vector<Tensor>& inputs, Fn fn) {
  if (!any_requires_grad(inputs)) return;
  attach_node(out, std::make_shared<LambdaNode<Fn>>(name, std::move(fn)), inputs);
}

inline bool needs(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

}  // namespace engine::nn::detail
