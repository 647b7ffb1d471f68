// Tests of the autograd engine with small test-only ops (scale and sum) built on core alone.
#include <gtest/gtest.h>

#include "core/autograd.h"
#include "core/error.h"

using namespace engine;

namespace {

// y = a * x (elementwise scale by a constant).
class ScaleNode : public Node {
 public:
  explicit ScaleNode(float a) : a_(a) {}
  std::vector<Tensor> apply(const Tensor& g) override {
    Tensor r = g.clone();
    r.mul_(a_);
    return {r};
  }
  std::string name() const override { return "Scale"; }
  float a_;
};

Tensor scale(const Tensor& x, float a) {
  Tensor y = x.clone().detach();
  y.mul_(a);
  if (any_requires_grad({x})) attach_node(y, std::make_shared<ScaleNode>(a), {x});
  return y;
}

// y = x1 + x2 (same shape).
class AddNode : public Node {
 public:
  std::vector<Tensor> apply(const Tensor& g) override { return {g, g}; }
  std::string name() const override { return "Add"; }
};

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = a.clone().detach();
  y.add_(b);
  if (any_requires_grad({a, b})) attach_node(y, std::make_shared<AddNode>(), {a, b});
  return y;
}

}  // namespace

TEST(Autograd, DiamondAccumulatesAndHooksFireOnceWhenFinal) {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  x.set_requires_grad(true);
  int fired = 0;
  std::vector<float> seen;
  x.register_grad_ready_hook([&](const Tensor& g) {
    ++fired;
    seen = g.to_vector();
  });
  // y = 2x + 3x (x reached by two paths) -> dy/dx = 5 per element; seed gradient (1, 10).
  Tensor y = add(scale(x, 2), scale(x, 3));
  y.backward(Tensor::from_vector({1, 10}, {2}));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(seen, (std::vector<float>{5, 50}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{5, 50}));
  // A second backward accumulates into the leaf's gradient, as PyTorch does.
  Tensor z = scale(x, 1);
  z.backward(Tensor::from_vector({1, 1}, {2}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{6, 51}));
  EXPECT_EQ(fired, 2);
}

TEST(Autograd, SameGradientTensorTwiceIsNotAliased) {
  Tensor x = Tensor::from_vector({1}, {1});
  x.set_requires_grad(true);
  Tensor y = add(x, x);  // AddNode returns the same tensor for both inputs
  y.backward(Tensor::from_vector({1}, {1}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2}));
}

TEST(Autograd, NoGradScopeRecordsNothing) {
  Tensor x = Tensor::from_vector({1}, {1});
  x.set_requires_grad(true);
  Tensor y;
  {
    NoGradGuard g;
    y = scale(x, 2);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, BranchWithoutGradientStillReleasesDeeperNodes) {
  // a needs grad, b does not; both feed an add whose output feeds another add with a.
  Tensor a = Tensor::from_vector({1}, {1});
  a.set_requires_grad(true);
  Tensor b = Tensor::from_vector({4}, {1});
  Tensor y = add(add(scale(a, 3), b), a);
  y.backward();
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{4}));
  EXPECT_FALSE(b.grad().defined());
}

// Gradients live in buffers kept across backwards: once the grad is let go (zero_grad), the next
// backward's first delivery lands in the same memory, with the values a fresh buffer would get.
TEST(Autograd, GradientMemoryPersistsAcrossSteps) {
  Tensor x = Tensor::from_vector({1, -2, 3}, {3});
  x.set_requires_grad(true);
  add(scale(x, 2.f), scale(x, 3.f)).backward(Tensor::from_vector({1, 1, 1}, {3}));
  const float* first = x.grad().data<float>();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{5, 5, 5}));
  for (float s : {0.5f, -4.f}) {
    x.set_grad(Tensor());  // zero_grad
    add(scale(x, s), scale(x, 1.f)).backward(Tensor::from_vector({1, 2, 3}, {3}));
    EXPECT_EQ(x.grad().data<float>(), first) << "a new gradient buffer at scale " << s;
    EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{s + 1, 2 * (s + 1), 3 * (s + 1)}));
  }
}

// A gradient someone still holds is never written over: the next backward gets new memory.
TEST(Autograd, AHeldGradientIsNotReused) {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  x.set_requires_grad(true);
  scale(x, 2.f).backward(Tensor::from_vector({1, 1}, {2}));
  Tensor kept = x.grad();
  x.set_grad(Tensor());
  scale(x, 7.f).backward(Tensor::from_vector({1, 1}, {2}));
  EXPECT_NE(x.grad().data<float>(), kept.data<float>());
  EXPECT_EQ(kept.to_vector(), (std::vector<float>{2, 2}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{7, 7}));
}
