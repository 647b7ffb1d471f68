// core/autograd.cpp: recording the graph and running it backward in dependency order.
#include "core/autograd.h"

#include <unordered_map>

#include "core/error.h"
#include "core/trace.h"

namespace engine {
namespace {

thread_local bool g_grad_enabled = true;

// A leaf's gradient sink: sums incoming gradients into leaf.grad, then fires the leaf's hooks.
// It runs once per backward, after every path to the leaf has delivered, so the grad is final.
// The gradient's memory persists across steps: a backward's first delivery is copied into the
// buffer the last one used, once zero_grad has let go of it (no one else holds it), so a
// training step allocates no gradient memory after its first.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::weak_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad) override {
    auto leaf = leaf_.lock();
    if (!leaf) return {};
    if (!leaf->grad) {
      leaf->grad = first_delivery(grad);
    } else {
      Tensor(leaf->grad).add_(grad);
    }
    Tensor g(leaf->grad);
    for (auto& h : leaf->hooks) h(g);
    return {};
  }
  std::string name() const override { return "AccumulateGrad"; }

 private:
  // grad copied into the kept buffer when only this node holds it (its TensorImpl and its
  // storage) and it fits; into a new one otherwise (the first step, or a grad still held).
  std::shared_ptr<TensorImpl> first_delivery(const Tensor& grad) {
    const bool reusable = buffer_ && buffer_.use_count() == 1 &&
                          buffer_->storage.use_count() == 1 && buffer_->shape == grad.shape() &&
                          buffer_->dtype == grad.dtype() &&
                          buffer_->storage->device == grad.device();
    if (!reusable) buffer_ = Tensor::empty(grad.shape(), grad.dtype(), grad.device()).impl_ptr();
    Tensor(buffer_).copy_from(grad);
    return buffer_;
  }

  std::weak_ptr<TensorImpl> leaf_;
  std::shared_ptr<TensorImpl> buffer_;  // the gradient's memory, kept across backwards
};

}  // namespace

bool grad_enabled() {
  return g_grad_enabled;
}
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) {
  g_grad_enabled = false;
}
NoGradGuard::~NoGradGuard() {
  g_grad_enabled = prev_;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge edge_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn};
  if (!impl->grad_accumulator)
    impl->grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return {impl->grad_accumulator};
}

void attach_node(Tensor& out, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs) {
  node->next.clear();
  for (const Tensor& t : inputs) node->next.push_back(edge_of(t));
  out.impl()->requires_grad = true;
  out.set_grad_fn(std::move(node));
}

void run_backward(const Tensor& root, const Tensor& grad_root) {
  ENGINE_CHECK(root.requires_grad(), "backward() on a tensor that does not require grad");
  ENGINE_CHECK(grad_root.numel() == root.numel(), "backward(): gradient of shape ",
               shape_str(grad_root.shape()), " for output of shape ", shape_str(root.shape()));
  Edge start = edge_of(root);
  NoGradGuard no_grad;  // gradients are computed without recording a graph

  // Count, for every node reachable from the root, how many edges lead into it.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{start.node.get()};
  deps[start.node.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      auto [it, fresh] = deps.try_emplace(e.node.get(), 0);
      ++it->second;
      if (fresh) stack.push_back(e.node.get());
    }
  }

  // Run a node once all its consumers have delivered (Kahn's order). A node that received no
  // gradient is still "run" (skipped) so that the nodes below it see their counts reach zero.
  struct Pending {
    Tensor grad;
    bool owned = false;  // grad is our own buffer (safe to add into)
  };
  std::unordered_map<Node*, Pending> pending;
  pending[start.node.get()].grad = grad_root.view(root.shape());
  std::vector<Node*> ready{start.node.get()};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g = std::move(pending[n].grad);
    pending.erase(n);
    std::vector<Tensor> grads;
    if (g.defined()) {
      trace::Scope ts(
          trace::enabled() && !n->label.empty() ? n->label + " " + n->name() : n->name(),
          "backward");
      grads = n->apply(g);
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      Node* next = n->next[i].node.get();
      if (!next) continue;
      if (i < grads.size() && grads[i].defined()) {
        Pending& acc = pending[next];
        if (!acc.grad.defined()) {
          acc.grad = grads[i];
        } else {
          if (!acc.owned) acc.grad = acc.grad.clone();
          acc.owned = true;
          acc.grad.add_(grads[i]);
        }
      }
      if (--deps[next] == 0) ready.push_back(next);
    }
  }
}

}  // namespace engine
