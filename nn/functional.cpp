// nn/functional.cpp: forward kernels plus the backward Nodes that autograd runs.
// Every op checks its inputs' shapes and devices and names them in errors. The CPU kernels are
// in kernels/cpu; tensors on CUDA reach kernels/cuda through the same functions (CUDA issue).
#include "nn/functional.h"

#include "core/autograd.h"
#include "core/error.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pool.h"

namespace engine::nn {
namespace {

namespace kc = kernels::cpu;

void check_cpu(const char* op, const Tensor& t) {
  ENGINE_CHECK(t.device().is_cpu(), op, ": tensor on ", t.device().str(),
               ": this build runs ", op, " on cpu only");
}

void check_dims(const char* op, const char* what, const Tensor& t, int64_t dims) {
  ENGINE_CHECK(t.defined(), op, ": ", what, " is undefined");
  ENGINE_CHECK(t.dim() == dims, op, ": ", what, " must have ", dims, " dimensions, got ",
               shape_str(t.shape()));
  check_cpu(op, t);
}

float* f(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// A Node whose backward is a lambda over saved tensors.
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

template <class Fn>
void record(Tensor& out, const char* name, const std::vector<Tensor>& inputs, Fn fn) {
  if (!any_requires_grad(inputs)) return;
  attach_node(out, std::make_shared<LambdaNode<Fn>>(name, std::move(fn)), inputs);
}

bool needs(const Tensor& t) { return t.defined() && t.requires_grad(); }

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_dims("linear", "input", x, 2);
  check_dims("linear", "weight", w, 2);
  ENGINE_CHECK(x.size(1) == w.size(1), "linear: input ", shape_str(x.shape()),
               " does not match weight ", shape_str(w.shape()));
  kernels::LinearShape s{x.size(0), w.size(1), w.size(0)};
  Tensor y = Tensor::empty({s.n, s.out});
  kc::linear_forward(f(x), f(w), f(b), f(y), s);
  record(y, "LinearBackward", {x, w, b}, [x, w, b, s](const Tensor& dy) {
    Tensor dx, dw, db;
    if (needs(x)) {
      dx = Tensor::empty(x.shape());
      kc::linear_backward_data(f(dy), f(w), f(dx), s);
    }
    if (needs(w)) {
      dw = Tensor::empty(w.shape());
      kc::linear_backward_weight(f(dy), f(x), f(dw), s, 0.0f);
    }
    if (needs(b)) {
      db = Tensor::empty(b.shape());
      kc::linear_backward_bias(f(dy), f(db), s, 0.0f);
    }
    return std::vector<Tensor>{dx, dw, db};
  });
  return y;
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding) {
  check_dims("conv2d", "input", x, 4);
  check_dims("conv2d", "weight", w, 4);
  ENGINE_CHECK(x.size(1) == w.size(1), "conv2d: input ", shape_str(x.shape()), " has ",
               x.size(1), " channels, weight ", shape_str(w.shape()), " expects ", w.size(1));
  kernels::Conv2dShape s{x.size(0), x.size(1), x.size(2), x.size(3),
                         w.size(0), w.size(2),  w.size(3), stride, padding};
  ENGINE_CHECK(s.oh() > 0 && s.ow() > 0, "conv2d: input ", shape_str(x.shape()),
               " is smaller than the kernel ", shape_str(w.shape()));
  Tensor y = Tensor::empty({s.n, s.c_out, s.oh(), s.ow()});
  Tensor ws = Tensor::empty({kc::conv2d_workspace_count(s)});
  kc::conv2d_forward(f(x), f(w), f(b), f(y), s, f(ws), ws.numel());
  record(y, "Conv2dBackward", {x, w, b}, [x, w, b, s](const Tensor& dy) {
    Tensor dx, dw, db;
    Tensor ws = Tensor::empty({kc::conv2d_workspace_count(s)});
    if (needs(x)) {
      dx = Tensor::empty(x.shape());
      kc::conv2d_backward_data(f(dy), f(w), f(dx), s, f(ws), ws.numel());
    }
    if (needs(b)) db = Tensor::empty(b.shape());
    if (needs(w)) {  // the filter pass also sums the bias gradient while it reads dy
      dw = Tensor::empty(w.shape());
      kc::conv2d_backward_filter(f(x), f(dy), f(dw), f(db), s, 0.0f, f(ws), ws.numel());
    } else if (needs(b)) {
      kc::conv2d_backward_bias(f(dy), f(db), s, 0.0f);
    }
    return std::vector<Tensor>{dx, dw, db};
  });
  return y;
}

Tensor max_pool2d(const Tensor& x, int kernel, int stride) {
  check_dims("max_pool2d", "input", x, 4);
  kernels::Pool2dShape s{x.size(0), x.size(1), x.size(2), x.size(3), kernel, stride};
  ENGINE_CHECK(s.oh() > 0 && s.ow() > 0, "max_pool2d: input ", shape_str(x.shape()),
               " is smaller than the window ", kernel);
  Shape out{s.n, s.c, s.oh(), s.ow()};
  Tensor y = Tensor::empty(out);
  auto arg = std::make_shared<std::vector<int32_t>>(shape_numel(out));
  kc::max_pool2d_forward(f(x), f(y), arg->data(), s);
  record(y, "MaxPool2dBackward", {x}, [arg, s, xs = x.shape()](const Tensor& dy) {
    Tensor dx = Tensor::empty(xs);
    kc::max_pool2d_backward(f(dy), arg->data(), f(dx), s);
    return std::vector<Tensor>{dx};
  });
  return y;
}

Tensor relu(const Tensor& x) {
  check_cpu("relu", x);
  Tensor y = Tensor::empty(x.shape());
  kc::relu_forward(f(x), f(y), x.numel());
  record(y, "ReluBackward", {x}, [y = y.detach()](const Tensor& dy) {
    Tensor dx = Tensor::empty(y.shape());
    kc::relu_backward(f(dy), f(y), f(dx), y.numel());
    return std::vector<Tensor>{dx};
  });
  return y;
}

Tensor dropout(const Tensor& x, float p, bool training, Generator& gen) {
  ENGINE_CHECK(p >= 0.0f && p <= 1.0f, "dropout: probability ", p, " outside [0, 1]");
  if (!training || p == 0.0f) return x;
  check_cpu("dropout", x);
  int64_t n = x.numel();
  uint64_t seed = gen.seed(), offset = gen.reserve(n);
  Tensor y = Tensor::empty(x.shape());
  kc::dropout_forward(f(x), f(y), n, p, seed, offset);
  // The mask is a pure function of (seed, offset): backward draws it again, nothing is saved.
  record(y, "DropoutBackward", {x}, [n, p, seed, offset](const Tensor& dy) {
    Tensor dx = Tensor::empty(dy.shape());
    kc::dropout_backward(f(dy), f(dx), n, p, seed, offset);
    return std::vector<Tensor>{dx};
  });
  return y;
}

Tensor dropout2d(const Tensor& x, float p, bool training, Generator& gen) {
  ENGINE_CHECK(p >= 0.0f && p <= 1.0f, "dropout2d: probability ", p, " outside [0, 1]");
  check_dims("dropout2d", "input", x, 4);
  if (!training || p == 0.0f) return x;
  int64_t planes = x.size(0) * x.size(1), plane = x.size(2) * x.size(3);
  uint64_t seed = gen.seed(), offset = gen.reserve(planes);
  Tensor y = Tensor::empty(x.shape());
  kc::dropout2d_forward(f(x), f(y), planes, plane, p, seed, offset);
  record(y, "Dropout2dBackward", {x}, [planes, plane, p, seed, offset](const Tensor& dy) {
    Tensor dx = Tensor::empty(dy.shape());
    kc::dropout2d_backward(f(dy), f(dx), planes, plane, p, seed, offset);
    return std::vector<Tensor>{dx};
  });
  return y;
}

Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    float momentum, float eps) {
  check_dims("batch_norm2d", "input", x, 4);
  int64_t c = x.size(1);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var})
    ENGINE_CHECK(t->defined() && t->numel() == c, "batch_norm2d: per-channel tensor of shape ",
                 t->defined() ? shape_str(t->shape()) : "undefined", " for ", c, " channels");
  kernels::BatchNormShape s{x.size(0), c, x.size(2) * x.size(3)};
  Tensor y = Tensor::empty(x.shape());
  if (!training) {
    kc::batch_norm_eval_forward(f(x), f(gamma), f(beta), f(running_mean), f(running_var), f(y),
                                s, eps);
    return y;  // eval mode is not differentiated in training; no graph recorded
  }
  ENGINE_CHECK(s.count() > 1, "batch_norm2d: training needs more than one value per channel, "
               "got input ", shape_str(x.shape()));
  Tensor mean = Tensor::empty({c}), invstd = Tensor::empty({c});
  kc::batch_norm_train_forward(f(x), f(gamma), f(beta), f(y), f(mean), f(invstd),
                               f(running_mean), f(running_var), s, momentum, eps);
  record(y, "BatchNorm2dBackward", {x, gamma, beta},
         [x = x.detach(), gamma = gamma.detach(), mean, invstd, s](const Tensor& dy) {
           Tensor dx = Tensor::empty(x.shape());
           Tensor dg = Tensor::empty(gamma.shape()), db = Tensor::empty(gamma.shape());
           kc::batch_norm_backward(f(dy), f(x), f(gamma), f(mean), f(invstd), f(dx), f(dg),
                                   f(db), s);
           return std::vector<Tensor>{dx, dg, db};
         });
  return y;
}

Tensor reshape(const Tensor& x, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      ENGINE_CHECK(infer < 0, "reshape: more than one -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    ENGINE_CHECK(known > 0 && x.numel() % known == 0, "reshape: cannot view ",
                 shape_str(x.shape()), " as ", shape_str(shape));
    shape[infer] = x.numel() / known;
  }
  Tensor y = x.view(shape);
  record(y, "ReshapeBackward", {x}, [xs = x.shape()](const Tensor& dy) {
    return std::vector<Tensor>{dy.view(xs)};
  });
  return y;
}

Tensor flatten(const Tensor& x) { return reshape(x, {x.size(0), -1}); }

Tensor log_softmax(const Tensor& x) {
  check_dims("log_softmax", "input", x, 2);
  int64_t n = x.size(0), c = x.size(1);
  Tensor y = Tensor::empty(x.shape());
  kc::log_softmax_forward(f(x), f(y), n, c);
  record(y, "LogSoftmaxBackward", {x}, [y = y.detach(), n, c](const Tensor& dy) {
    Tensor dx = Tensor::empty(y.shape());
    kc::log_softmax_backward(f(dy), f(y), f(dx), n, c);
    return std::vector<Tensor>{dx};
  });
  return y;
}

Tensor nll_loss(const Tensor& logp, const Tensor& target) {
  check_dims("nll_loss", "input", logp, 2);
  check_dims("nll_loss", "target", target, 1);
  ENGINE_CHECK(target.dtype() == DType::I64, "nll_loss: target must be int64");
  int64_t n = logp.size(0), c = logp.size(1);
  ENGINE_CHECK(target.size(0) == n, "nll_loss: ", n, " rows of scores, ", target.size(0),
               " targets");
  Tensor loss = Tensor::full({}, kc::nll_loss_forward(f(logp), target.data<int64_t>(), n, c));
  record(loss, "NllLossBackward", {logp}, [target, n, c](const Tensor& dloss) {
    Tensor dlogp = Tensor::empty({n, c});
    kc::nll_loss_backward(dloss.item(), target.data<int64_t>(), f(dlogp), n, c);
    return std::vector<Tensor>{dlogp};
  });
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  return nll_loss(log_softmax(logits), target);
}

Tensor argmax(const Tensor& x) {
  check_dims("argmax", "input", x, 2);
  Tensor out = Tensor::empty({x.size(0)}, DType::I64);
  kc::argmax_rows(f(x), x.size(0), x.size(1), out.data<int64_t>());
  return out;
}

int64_t correct_count(const Tensor& scores, const Tensor& target) {
  Tensor pred = argmax(scores);
  ENGINE_CHECK(target.numel() == pred.numel(), "correct_count: ", pred.numel(),
               " predictions, ", target.numel(), " targets");
  const int64_t* p = pred.data<int64_t>();
  const int64_t* t = target.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) n += p[i] == t[i];
  return n;
}

}  // namespace engine::nn
