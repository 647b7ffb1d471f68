// core/autograd.h: the dynamic (define-by-run) autograd graph.
// Each differentiable op's output holds a Node; a Node's edges point to the Nodes of its inputs
// (or to the AccumulateGrad node of a leaf). backward() runs Nodes in dependency order, so a
// leaf's AccumulateGrad runs exactly when its gradient is final: there its hooks fire, which is
// where gradient synchronisation starts a bucket's allreduce while backward goes on.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace engine {

struct Edge {
  std::shared_ptr<Node> node;  // null: the input needs no gradient
};

class Node {
 public:
  virtual ~Node() = default;
  // grad_output: gradient w.r.t. this node's (single) output. Returns one gradient per input edge
  // (an undefined Tensor where the input needs none).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual std::string name() const = 0;
  std::vector<Edge> next;
  std::string label;  // the layer that made it ("conv1"), for traces and profiles; may be empty
};

// Is autograd recording? Thread-local; false inside a NoGradGuard.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Does any of these inputs need a gradient (and is grad mode on)?
bool any_requires_grad(const std::vector<Tensor>& inputs);
// Wires `node` to the inputs (one edge each) and makes it out's grad_fn; marks out requires_grad.
void attach_node(Tensor& out, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs);
// The edge for one input: its grad_fn, its leaf accumulator, or none.
Edge edge_of(const Tensor& t);

// Runs the graph backward from root (seed gradient grad_root, same shape as root).
void run_backward(const Tensor& root, const Tensor& grad_root);

}  // namespace engine
