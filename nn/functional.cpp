// nn/functional.cpp: forward kernels plus the backward Nodes that autograd runs.
// Every op checks its inputs' shapes and devices and names them in errors, then calls each kernel
// once through kernels::call (kernels/dispatch.h), which runs kernels/cpu on the CPU and
// kernels/cuda on cuda:N (queued on its compute stream). Outputs, saved tensors and gradients
// live on the inputs' device.
#include "nn/functional.h"

#include <initializer_list>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/error.h"
#include "core/trace.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/ops.h"
#include "kernels/dispatch.h"
#include "nn/chunked.h"
#include "nn/lambda_node.h"
#include "nn/precision.h"

namespace engine::nn {
namespace {

namespace kc = kernels::cpu;
namespace kg = kernels::cuda;  // stubs that throw in a build without CUDA
using kernels::call;

// One of two kernels of the same signature: the bf16 one or the fp32 one, the relu-fused one or
// the plain one (overloaded kernels resolve to the first one's type).
template <class F>
F* pick(bool first, F* first_fn, F* second_fn) {
  return first ? first_fn : second_fn;
}

// Where bf16 matmul precision multiplies in bf16: the layers whose products it speeds up. A linear
// layer of fewer than 16 outputs (the 10-class heads: the bf16 GEMM's tiles are 16 or 32
// outputs wide) or of fewer than 8192 weights, and a convolution of one input channel (K = KH *
// KW, too short for bf16 pairs) stay fp32, more exact and not slower: bf16 ran them at 0.57-1.02x
// (heads; convnet.fc 211 against 121 us a step) and 0.15-0.91x (first convolutions) of fp32
// (bench_kernels, Zen 5, 2 threads, batch 128). The choice depends on the weights alone, so
// every batch of a layer runs alike, on every device.
constexpr int64_t kBf16MinLinearWeights = 8192, kBf16MinLinearOutputs = 16;
bool runs_in_bf16(const kernels::LinearShape& s) {
  return matmul_precision() == Precision::BF16 && s.out >= kBf16MinLinearOutputs &&
         s.in * s.out >= kBf16MinLinearWeights;
}
bool runs_in_bf16(const kernels::Conv2dShape& s) {
  return matmul_precision() == Precision::BF16 && s.c_in > 1;
}

void check_dims(const char* op, const char* what, const Tensor& t, int64_t dims) {
  ENGINE_CHECK(t.defined(), op, ": ", what, " is undefined");
  ENGINE_CHECK(t.dim() == dims, op, ": ", what, " must have ", dims, " dimensions, got ",
               shape_str(t.shape()));
}

// The device of `first`; every other defined tensor must be on it too.
Device same_device(const char* op, const Tensor& first,
                   std::initializer_list<std::pair<const char*, const Tensor*>> others) {
  const Device d = first.device();
  for (const auto& [what, t] : others)
    ENGINE_CHECK(!t->defined() || t->device() == d, op, ": ", what, " is on ", t->device().str(),
                 ", the input on ", d.str());
  return d;
}

// A gradient arriving in backward must be on the forward's device.
void check_grad(const char* op, const Tensor& g, Device d) {
  ENGINE_CHECK(g.defined() && g.device() == d, op, ": gradient on ",
               g.defined() ? g.device().str() : "undefined", ", forward ran on ", d.str());
}

float* f(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

using detail::needs;
using detail::record;

// The chunked mode of the calling thread (nn/chunked.h), checked for what it does not cover.
ChunkedGradients* chunked_mode(const char* op, Device dev) {
  ChunkedGradients* cg = ChunkedGradients::current();
  ENGINE_CHECK(!cg || matmul_precision() != Precision::BF16 || dev.is_cpu(), op,
               ": chunked gradients (world-invariant) in bf16 run on the CPU only");
  return cg;
}

// The CPU's bf16 kernel for a pass: under the chunked mode its batch-invariant schedule (the
// GEMM at every N), else the default (faster for small products).
template <class F>
F* bf16_cpu(const ChunkedGradients* cg, F* invariant, F* plain) {
  return cg ? invariant : plain;
}

// A backward recorded under the mode runs inside that same scope (its accumulators live there).
void check_scope(const char* op, const ChunkedGradients* cg) {
  ENGINE_CHECK(ChunkedGradients::current() == cg, op,
               ": backward ran outside the chunked-gradient scope its forward ran in");
}

// linear's weight and bias gradients, each chunk of the share alone (beta 0), into the tree.
void linear_chunk_grads(ChunkedGradients& cg, const Tensor& x, const Tensor& w, const Tensor& b,
                        const Tensor& dy, const kernels::LinearShape& s, Device dev, bool bf16) {
  check_scope("linear", &cg);
  for (const LocalChunk& c : cg.local_chunks("linear", s.n)) {
    const kernels::LinearShape cs{c.count, s.in, s.out};
    const float* cdy = f(dy) + c.begin * s.out;
    if (needs(w)) {
      Tensor dw = Tensor::empty(w.shape(), DType::F32, dev);
      call(dev, pick(bf16, kc::linear_backward_weight_bf16, kc::linear_backward_weight),
           pick(bf16, kg::linear_backward_weight_bf16, kg::linear_backward_weight), cdy,
           f(x) + c.begin * s.in, f(dw), cs, 0.0f);
      cg.push(w, c.global, std::move(dw));
    }
    if (needs(b)) {
      Tensor db = Tensor::empty(b.shape(), DType::F32, dev);
      call(dev, kc::linear_backward_bias, kg::linear_backward_bias, cdy, f(db), cs, 0.0f);
      cg.push(b, c.global, std::move(db));
    }
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_dims("linear", "input", x, 2);
  check_dims("linear", "weight", w, 2);
  ENGINE_CHECK(x.size(1) == w.size(1), "linear: input ", shape_str(x.shape()),
               " does not match weight ", shape_str(w.shape()));
  const Device dev = same_device("linear", x, {{"weight", &w}, {"bias", &b}});
  kernels::LinearShape s{x.size(0), w.size(1), w.size(0)};
  Tensor y = Tensor::empty({s.n, s.out}, DType::F32, dev);
  const bool bf16 = runs_in_bf16(s);  // the backward's too
  ChunkedGradients* cg = chunked_mode("linear", dev);
  call(dev,
       pick(bf16, bf16_cpu(cg, kc::linear_forward_bf16_invariant, kc::linear_forward_bf16),
            kc::linear_forward),
       pick(bf16, kg::linear_forward_bf16, kg::linear_forward), f(x), f(w), f(b), f(y), s);
  record(y, "LinearBackward", {x, w, b}, [x, w, b, s, dev, bf16, cg](const Tensor& dy) {
    check_grad("linear", dy, dev);
    Tensor dx, dw, db;
    if (cg) linear_chunk_grads(*cg, x, w, b, dy, s, dev, bf16);
    if (needs(x)) {
      dx = Tensor::empty(x.shape(), DType::F32, dev);
      call(
          dev,
          pick(bf16,
               bf16_cpu(cg, kc::linear_backward_data_bf16_invariant, kc::linear_backward_data_bf16),
               kc::linear_backward_data),
          pick(bf16, kg::linear_backward_data_bf16, kg::linear_backward_data), f(dy), f(w), f(dx),
          s);
    }
    if (needs(w) && !cg) {
      dw = Tensor::empty(w.shape(), DType::F32, dev);
      call(dev, pick(bf16, kc::linear_backward_weight_bf16, kc::linear_backward_weight),
           pick(bf16, kg::linear_backward_weight_bf16, kg::linear_backward_weight), f(dy), f(x),
           f(dw), s, 0.0f);
    }
    if (needs(b) && !cg) {
      db = Tensor::empty(b.shape(), DType::F32, dev);
      call(dev, kc::linear_backward_bias, kg::linear_backward_bias, f(dy), f(db), s, 0.0f);
    }
    return std::vector<Tensor>{dx, dw, db};
  });
  return y;
}

namespace {

// conv2d's checks of its inputs; its shape.
kernels::Conv2dShape conv_shape(const char* op, const Tensor& x, const Tensor& w, int stride,
                                int padding) {
  check_dims(op, "input", x, 4);
  check_dims(op, "weight", w, 4);
  ENGINE_CHECK(x.size(1) == w.size(1), op, ": input ", shape_str(x.shape()), " has ", x.size(1),
               " channels, weight ", shape_str(w.shape()), " expects ", w.size(1));
  kernels::Conv2dShape s{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0),
                         w.size(2), w.size(3), stride,    padding};
  ENGINE_CHECK(s.oh() > 0 && s.ow() > 0, op, ": input ", shape_str(x.shape()),
               " is smaller than the kernel ", shape_str(w.shape()));
  return s;
}

// conv2d's weight and bias gradients, each chunk of the share alone (beta 0), into the tree.
void conv2d_chunk_grads(ChunkedGradients& cg, const Tensor& x, const Tensor& w, const Tensor& b,
                        const Tensor& dy, const kernels::Conv2dShape& s, Device dev, bool bf16) {
  using WeightFn =
      void(const float*, const float*, float*, float*, const kernels::Conv2dShape&, float);
  WeightFn* cpu_weight = kc::conv2d_backward_weight;  // the overload without a workspace
  check_scope("conv2d", &cg);
  for (const LocalChunk& c : cg.local_chunks("conv2d", s.n)) {
    kernels::Conv2dShape cs = s;
    cs.n = c.count;
    const float* cx = f(x) + c.begin * s.c_in * s.h * s.w;
    const float* cdy = f(dy) + c.begin * s.c_out * s.oh() * s.ow();
    Tensor dw = needs(w) ? Tensor::empty(w.shape(), DType::F32, dev) : Tensor();
    Tensor db = needs(b) ? Tensor::empty(b.shape(), DType::F32, dev) : Tensor();
    if (needs(w))  // the bias gradient fused, as in the default path
      call(dev, pick<WeightFn>(bf16, kc::conv2d_backward_weight_bf16, cpu_weight),
           pick(bf16, kg::conv2d_backward_weight_bf16, kg::conv2d_backward_weight), cx, cdy, f(dw),
           f(db), cs, 0.0f);
    else if (needs(b))
      call(dev, kc::conv2d_backward_bias, kg::conv2d_backward_bias, cdy, f(db), cs, 0.0f);
    if (needs(w)) cg.push(w, c.global, std::move(dw));
    if (needs(b)) cg.push(b, c.global, std::move(db));
  }
}

// conv2d's gradients {dx, dw, db} from dy, the gradient of its output (those not needed undefined;
// under the chunked mode dw and db go to its tree instead).
std::vector<Tensor> conv2d_grads(const Tensor& x, const Tensor& w, const Tensor& b,
                                 const Tensor& dy, const kernels::Conv2dShape& s, Device dev,
                                 bool bf16, ChunkedGradients* cg) {
  Tensor dx, dw, db;
  if (needs(x)) {
    dx = Tensor::empty(x.shape(), DType::F32, dev);
    call(
        dev,
        pick(bf16,
             bf16_cpu(cg, kc::conv2d_backward_input_bf16_invariant, kc::conv2d_backward_input_bf16),
             kc::conv2d_backward_input),
        pick(bf16, kg::conv2d_backward_input_bf16, kg::conv2d_backward_input), f(dy), f(w), f(dx),
        s);
  }
  if (cg) {
    conv2d_chunk_grads(*cg, x, w, b, dy, s, dev, bf16);
    return std::vector<Tensor>{dx, dw, db};
  }
  if (needs(b)) db = Tensor::empty(b.shape(), DType::F32, dev);
  if (needs(w)) {  // the weight pass also sums the bias gradient (fused on the CPU: dy read once)
    dw = Tensor::empty(w.shape(), DType::F32, dev);
    call(dev, pick(bf16, kc::conv2d_backward_weight_bf16, kc::conv2d_backward_weight),
         pick(bf16, kg::conv2d_backward_weight_bf16, kg::conv2d_backward_weight), f(x), f(dy),
         f(dw), f(db), s, 0.0f);
  } else if (needs(b)) {
    call(dev, kc::conv2d_backward_bias, kg::conv2d_backward_bias, f(dy), f(db), s, 0.0f);
  }
  return std::vector<Tensor>{dx, dw, db};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding) {
  const kernels::Conv2dShape s = conv_shape("conv2d", x, w, stride, padding);
  const Device dev = same_device("conv2d", x, {{"weight", &w}, {"bias", &b}});
  Tensor y = Tensor::empty({s.n, s.c_out, s.oh(), s.ow()}, DType::F32, dev);
  // Workspaces come from the device's allocator cache inside the kernels.
  const bool bf16 = runs_in_bf16(s);  // the backward's too
  ChunkedGradients* cg = chunked_mode("conv2d", dev);
  call(dev,
       pick(bf16, bf16_cpu(cg, kc::conv2d_forward_bf16_invariant, kc::conv2d_forward_bf16),
            kc::conv2d_forward),
       pick(bf16, kg::conv2d_forward_bf16, kg::conv2d_forward), f(x), f(w), f(b), f(y), s);
  record(y, "Conv2dBackward", {x, w, b}, [x, w, b, s, dev, bf16, cg](const Tensor& dy) {
    check_grad("conv2d", dy, dev);
    return conv2d_grads(x, w, b, dy, s, dev, bf16, cg);
  });
  return y;
}

namespace {

// The pool's window fits the tensor it pools (`what`: that tensor, for the error).
void check_window(const char* op, const kernels::Pool2dShape& s, const std::string& what) {
  ENGINE_CHECK(s.k > 0 && s.stride > 0 && s.h >= s.k && s.w >= s.k, op, ": ", what,
               " is smaller than the window ", s.k, " (stride ", s.stride, ")");
}

// The gradient of the pool's input from dy, the gradient of its output y (relu: max_pool2d_relu,
// whose backward reads y), arg its windows' argmaxes.
Tensor pool_grad(const Tensor& dy, const Tensor& y, const Tensor& arg,
                 const kernels::Pool2dShape& s, bool relu, Device dev) {
  Tensor dx = Tensor::empty({s.n, s.c, s.h, s.w}, DType::F32, dev);
  if (relu)
    call(dev, kc::max_pool2d_relu_backward, kg::max_pool2d_relu_backward, f(dy), f(y),
         arg.data<int32_t>(), f(dx), s);
  else
    call(dev, kc::max_pool2d_backward, kg::max_pool2d_backward, f(dy), arg.data<int32_t>(), f(dx),
         s);
  return dx;
}

// max_pool2d, or with relu fused (whose backward also reads y, for relu's gradient).
Tensor pool(const char* op, const Tensor& x, int kernel, int stride, bool relu) {
  trace::Scope ts(op, "forward");
  check_dims(op, "input", x, 4);
  kernels::Pool2dShape s{x.size(0), x.size(1), x.size(2), x.size(3), kernel, stride};
  check_window(op, s, "input " + shape_str(x.shape()));
  Shape out{s.n, s.c, s.oh(), s.ow()};
  const Device dev = x.device();
  Tensor y = Tensor::empty(out, DType::F32, dev);
  // The argmax of each window within its (H, W) plane: int32, as the SIMD kernel's float lanes.
  Tensor arg = Tensor::empty(out, DType::I32, dev);
  call(dev, pick(relu, kc::max_pool2d_relu_forward, kc::max_pool2d_forward),
       pick(relu, kg::max_pool2d_relu_forward, kg::max_pool2d_forward), f(x), f(y),
       arg.data<int32_t>(), s);
  record(y, relu ? "MaxPool2dReluBackward" : "MaxPool2dBackward", {x},
         [op, y = relu ? y.detach() : Tensor(), arg, s, relu, dev](const Tensor& dy) {
           check_grad(op, dy, dev);
           return std::vector<Tensor>{pool_grad(dy, y, arg, s, relu, dev)};
         });
  return y;
}

}  // namespace

Tensor conv2d_pool(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding,
                   int kernel, int pool_stride, bool relu) {
  const char* op = "conv2d_pool";
  const kernels::Conv2dShape s = conv_shape(op, x, w, stride, padding);
  const Device dev = same_device(op, x, {{"weight", &w}, {"bias", &b}});
  const kernels::Pool2dShape ps{s.n, s.c_out, s.oh(), s.ow(), kernel, pool_stride};
  if (!dev.is_cpu() || runs_in_bf16(s) || !kc::conv2d_pool_supported(s))
    return pool(relu ? "max_pool2d_relu" : "max_pool2d", conv2d(x, w, b, stride, padding), kernel,
                pool_stride, relu);
  check_window(op, ps, "convolution output " + shape_str({s.n, s.c_out, s.oh(), s.ow()}));
  trace::Scope ts(op, "forward");
  Tensor y = Tensor::empty({s.n, s.c_out, ps.oh(), ps.ow()}, DType::F32, dev);
  Tensor arg = Tensor::empty(y.shape(), DType::I32, dev);
  kc::conv2d_pool_forward(f(x), f(w), f(b), f(y), arg.data<int32_t>(), s, ps, relu);
  record(y, "Conv2dPoolBackward", {x, w, b},
         [op, x, w, b, y = y.detach(), arg, s, ps, relu, dev,
          cg = chunked_mode(op, dev)](const Tensor& dy) {
           check_grad(op, dy, dev);
           return conv2d_grads(x, w, b, pool_grad(dy, y, arg, ps, relu, dev), s, dev, false, cg);
         });
  return y;
}

Tensor max_pool2d(const Tensor& x, int kernel, int stride) {
  return pool("max_pool2d", x, kernel, stride, false);
}

Tensor max_pool2d_relu(const Tensor& x, int kernel, int stride) {
  return pool("max_pool2d_relu", x, kernel, stride, true);
}

Tensor relu(const Tensor& x) {
  trace::Scope ts("relu", "forward");
  ENGINE_CHECK(x.defined(), "relu: input is undefined");
  const Device dev = x.device();
  Tensor y = Tensor::empty(x.shape(), DType::F32, dev);
  call(dev, kc::relu_forward, kg::relu_forward, f(x), f(y), x.numel());
  record(y, "ReluBackward", {x}, [y = y.detach(), dev](const Tensor& dy) {
    check_grad("relu", dy, dev);
    Tensor dx = Tensor::empty(y.shape(), DType::F32, dev);
    call(dev, kc::relu_backward, kg::relu_backward, f(dy), f(y), f(dx), y.numel());
    return std::vector<Tensor>{dx};
  });
  return y;
}

namespace {

// Where a dropout call draws: by global position under the chunked mode (kernels/dropout.h: the
// whole batch's counters reserved on every rank, this share from its first sample), else unset.
struct GlobalDraw {
  bool chunked = false;
  uint64_t seed = 0, offset = 0, first = 0;
};
GlobalDraw global_draw(const char* op, const Tensor& x, int64_t count, Generator& gen) {
  const ChunkedGradients* cg = ChunkedGradients::current();
  if (!cg) return {};
  const int64_t rows = x.size(0), per_sample = rows > 0 ? count / rows : 0;
  cg->local_chunks(op, rows);  // the share is whole chunks of the batch
  const ChunkPlan& plan = cg->plan();
  return {true, gen.seed(), gen.reserve(static_cast<uint64_t>(plan.global_batch * per_sample)),
          static_cast<uint64_t>(plan.first_sample() * per_sample)};
}

// dropout2d by global position: planes (n, c) of the share draw as planes of the global batch.
Tensor dropout2d_at(const Tensor& x, float p, const GlobalDraw& g) {
  const int64_t planes = x.size(0) * x.size(1), plane = x.size(2) * x.size(3);
  const Device dev = x.device();
  Tensor y = Tensor::empty(x.shape(), DType::F32, dev);
  call(dev, kc::dropout2d_forward_at, kg::dropout2d_forward_at, f(x), f(y), planes, plane, p,
       g.seed, g.offset, g.first);
  record(y, "Dropout2dBackward", {x}, [planes, plane, p, g, dev](const Tensor& dy) {
    check_grad("dropout2d", dy, dev);
    Tensor dx = Tensor::empty(dy.shape(), DType::F32, dev);
    call(dev, kc::dropout2d_backward_at, kg::dropout2d_backward_at, f(dy), f(dx), planes, plane, p,
         g.seed, g.offset, g.first);
    return std::vector<Tensor>{dx};
  });
  return y;
}

}  // namespace

Tensor dropout(const Tensor& x, float p, bool training, Generator& gen) {
  ENGINE_CHECK(p >= 0.0f && p <= 1.0f, "dropout: probability ", p, " outside [0, 1]");
  if (!training || p == 0.0f) return x;
  ENGINE_CHECK(x.defined(), "dropout: input is undefined");
  const Device dev = x.device();
  int64_t n = x.numel();
  Tensor y = Tensor::empty(x.shape(), DType::F32, dev);
  // Same (seed, offset), same mask on CPU and CUDA. One byte per element is kept for the
  // backward, which then draws no Philox numbers.
  Tensor mask = Tensor::empty(x.shape(), DType::U8, dev);
  if (const GlobalDraw g = global_draw("dropout", x, n, gen); g.chunked) {
    call(dev, kc::dropout_forward_mask_at, kg::dropout_forward_mask_at, f(x), f(y),
         mask.data<uint8_t>(), n, p, g.seed, g.offset, g.first);
  } else {
    uint64_t seed = gen.seed(), offset = gen.reserve(n);
    call(dev, kc::dropout_forward_mask, kg::dropout_forward_mask, f(x), f(y), mask.data<uint8_t>(),
         n, p, seed, offset);
  }
  record(y, "DropoutBackward", {x}, [n, p, mask, dev](const Tensor& dy) {
    check_grad("dropout", dy, dev);
    Tensor dx = Tensor::empty(dy.shape(), DType::F32, dev);
    call(dev, kc::dropout_backward_mask, kg::dropout_backward_mask, f(dy), mask.data<uint8_t>(),
         f(dx), n, p);
    return std::vector<Tensor>{dx};
  });
  return y;
}

Tensor dropout2d(const Tensor& x, float p, bool training, Generator& gen) {
  ENGINE_CHECK(p >= 0.0f && p <= 1.0f, "dropout2d: probability ", p, " outside [0, 1]");
  check_dims("dropout2d", "input", x, 4);
  if (!training || p == 0.0f) return x;
  int64_t planes = x.size(0) * x.size(1), plane = x.size(2) * x.size(3);
  const GlobalDraw g = global_draw("dropout2d", x, planes, gen);
  if (g.chunked) return dropout2d_at(x, p, g);
  uint64_t seed = gen.seed(), offset = gen.reserve(planes);
  const Device dev = x.device();
  Tensor y = Tensor::empty(x.shape(), DType::F32, dev);
  call(dev, kc::dropout2d_forward, kg::dropout2d_forward, f(x), f(y), planes, plane, p, seed,
       offset);
  record(y, "Dropout2dBackward", {x}, [planes, plane, p, seed, offset, dev](const Tensor& dy) {
    check_grad("dropout2d", dy, dev);
    Tensor dx = Tensor::empty(dy.shape(), DType::F32, dev);
    call(dev, kc::dropout2d_backward, kg::dropout2d_backward, f(dy), f(dx), planes, plane, p, seed,
         offset);
    return std::vector<Tensor>{dx};
  });
  return y;
}

namespace {

// Training-mode batch norm's gradients {dx, dgamma, dbeta} from dy, with its saved statistics.
std::vector<Tensor> batch_norm_grads(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                     const Tensor& mean, const Tensor& invstd,
                                     const kernels::BatchNormShape& s, Device dev) {
  Tensor dx = Tensor::empty(x.shape(), DType::F32, dev);
  Tensor dg = Tensor::empty(gamma.shape(), DType::F32, dev),
         db = Tensor::empty(gamma.shape(), DType::F32, dev);
  call(dev, kc::batch_norm_backward, kg::batch_norm_backward, f(dy), f(x), f(gamma), f(mean),
       f(invstd), f(dx), f(dg), f(db), s);
  return std::vector<Tensor>{dx, dg, db};
}

// batch_norm2d's checks of its inputs (op names it in errors); the device they are on.
Device check_batch_norm(const char* op, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var, bool training) {
  check_dims(op, "input", x, 4);
  int64_t c = x.size(1);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var})
    ENGINE_CHECK(t->defined() && t->numel() == c, op, ": per-channel tensor of shape ",
                 t->defined() ? shape_str(t->shape()) : "undefined", " for ", c, " channels");
  ENGINE_CHECK(
      !training || !ChunkedGradients::current(), op,
      ": chunked gradients (world-invariant) do not cover BatchNorm's training statistics");
  ENGINE_CHECK(!training || x.size(0) * x.size(2) * x.size(3) > 1, op,
               ": training needs more than one value per channel, got input ",
               shape_str(x.shape()));
  return same_device(op, x,
                     {{"weight", &gamma},
                      {"bias", &beta},
                      {"running_mean", &running_mean},
                      {"running_var", &running_var}});
}

}  // namespace

Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    float momentum, float eps) {
  const Device dev =
      check_batch_norm("batch_norm2d", x, gamma, beta, running_mean, running_var, training);
  const int64_t c = x.size(1);
  kernels::BatchNormShape s{x.size(0), c, x.size(2) * x.size(3)};
  Tensor y = Tensor::empty(x.shape(), DType::F32, dev);
  if (!training) {
    call(dev, kc::batch_norm_eval_forward, kg::batch_norm_eval_forward, f(x), f(gamma), f(beta),
         f(running_mean), f(running_var), f(y), s, eps);
    return y;  // eval mode is not differentiated in training; no graph recorded
  }
  Tensor mean = Tensor::empty({c}, DType::F32, dev), invstd = Tensor::empty({c}, DType::F32, dev);
  call(dev, kc::batch_norm_train_forward, kg::batch_norm_train_forward, f(x), f(gamma), f(beta),
       f(y), f(mean), f(invstd), f(running_mean), f(running_var), s, momentum, eps);
  record(y, "BatchNorm2dBackward", {x, gamma, beta},
         [x = x.detach(), gamma = gamma.detach(), mean, invstd, s, dev](const Tensor& dy) {
           check_grad("batch_norm2d", dy, dev);
           return batch_norm_grads(dy, x, gamma, mean, invstd, s, dev);
         });
  return y;
}

namespace {

// The per-channel affine of batch norm with statistics mean and invstd: x * alpha + shift.
void bn_alpha_shift(const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                    const Tensor& beta, Tensor& alpha, Tensor& shift) {
  const float *m = mean.data<float>(), *is = invstd.data<float>();
  const float *g = gamma.data<float>(), *b = beta.data<float>();
  for (int64_t c = 0; c < mean.numel(); ++c) {
    const kernels::BnAffine a = kernels::bn_affine(m[c], is[c], g[c], b[c]);
    alpha.data<float>()[c] = a.alpha;
    shift.data<float>()[c] = a.shift;
  }
}

}  // namespace

Tensor batch_norm2d_pool(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var, bool training,
                         int kernel, int stride, bool relu, float momentum, float eps) {
  const char* op = "batch_norm2d_pool";
  const Device dev = check_batch_norm(op, x, gamma, beta, running_mean, running_var, training);
  if (!dev.is_cpu())  // CUDA: the two passes as they are
    return pool(relu ? "max_pool2d_relu" : "max_pool2d",
                batch_norm2d(x, gamma, beta, running_mean, running_var, training, momentum, eps),
                kernel, stride, relu);
  trace::Scope ts(op, "forward");
  const int64_t c = x.size(1);
  kernels::Pool2dShape ps{x.size(0), c, x.size(2), x.size(3), kernel, stride};
  check_window(op, ps, "input " + shape_str(x.shape()));
  const kernels::BatchNormShape s{ps.n, c, ps.h * ps.w};
  Tensor mean = Tensor::empty({c}, DType::F32, dev), invstd = Tensor::empty({c}, DType::F32, dev);
  if (training) {
    kc::batch_norm_train_stats(f(x), f(mean), f(invstd), f(running_mean), f(running_var), s,
                               momentum, eps);
  } else {
    for (int64_t i = 0; i < c; ++i) {
      mean.data<float>()[i] = running_mean.data<float>()[i];
      invstd.data<float>()[i] =
          static_cast<float>(kernels::bn_invstd(double(running_var.data<float>()[i]), double(eps)));
    }
  }
  Tensor alpha = Tensor::empty({c}, DType::F32, dev), shift = Tensor::empty({c}, DType::F32, dev);
  bn_alpha_shift(mean, invstd, gamma, beta, alpha, shift);
  Tensor y = Tensor::empty({ps.n, c, ps.oh(), ps.ow()}, DType::F32, dev);
  Tensor arg = Tensor::empty(y.shape(), DType::I32, dev);
  kc::max_pool2d_affine_forward(f(x), f(alpha), f(shift), f(y), arg.data<int32_t>(), ps, relu);
  if (!training) return y;  // as batch_norm2d: eval mode records no graph
  // The backward runs the two ops' kernels: a fused one (sums over the argmaxes, one plane of
  // the gradient at a time) measured slower than they are (bench_kernels, Zen 5: layer1 704 µs
  // against 663, layer2 463 against 318).
  record(y, "BatchNorm2dPoolBackward", {x, gamma, beta},
         [op, x = x.detach(), gamma = gamma.detach(), y = y.detach(), arg, mean, invstd, ps, s,
          relu, dev](const Tensor& dy) {
           check_grad(op, dy, dev);
           Tensor dh = pool_grad(dy, y, arg, ps, relu, dev);  // gradient of the normalised x
           return batch_norm_grads(dh, x, gamma, mean, invstd, s, dev);
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
    ENGINE_CHECK(known > 0 && x.numel() % known == 0, "reshape: cannot view ", shape_str(x.shape()),
                 " as ", shape_str(shape));
    shape[infer] = x.numel() / known;
  }
  Tensor y = x.view(shape);
  record(y, "ReshapeBackward", {x},
         [xs = x.shape()](const Tensor& dy) { return std::vector<Tensor>{dy.view(xs)}; });
  return y;
}

Tensor flatten(const Tensor& x) {
  return reshape(x, {x.size(0), -1});
}

Tensor log_softmax(const Tensor& x) {
  trace::Scope ts("log_softmax", "forward");
  check_dims("log_softmax", "input", x, 2);
  int64_t n = x.size(0), c = x.size(1);
  const Device dev = x.device();
  Tensor y = Tensor::empty(x.shape(), DType::F32, dev);
  call(dev, kc::log_softmax_forward, kg::log_softmax_forward, f(x), f(y), n, c);
  record(y, "LogSoftmaxBackward", {x}, [y = y.detach(), n, c, dev](const Tensor& dy) {
    check_grad("log_softmax", dy, dev);
    Tensor dx = Tensor::empty(y.shape(), DType::F32, dev);
    call(dev, kc::log_softmax_backward, kg::log_softmax_backward, f(dy), f(y), f(dx), n, c);
    return std::vector<Tensor>{dx};
  });
  return y;
}

namespace {

// Under the chunked mode: each chunk's sum of per-sample losses (in sample order) into the loss's
// tree, for a loss summed over the global batch with the same bits at every world size.
void chunk_losses(ChunkedGradients& cg, const Tensor& logp, const Tensor& target) {
  ENGINE_CHECK(logp.device().is_cpu(),
               "nll_loss: chunked gradients scale the loss on the CPU "
               "only, the input is on ",
               logp.device().str());
  const int64_t n = logp.size(0), c = logp.size(1);
  std::vector<float> per(static_cast<size_t>(n));
  kc::nll_loss_per_sample(f(logp), target.data<int64_t>(), per.data(), n, c);
  for (const LocalChunk& ch : cg.local_chunks("nll_loss", n)) {
    float sum = 0.0f;
    for (int64_t i = ch.begin; i < ch.begin + ch.count; ++i) sum += per[static_cast<size_t>(i)];
    cg.push_loss(ch.global, Tensor::from_vector({sum}, {}));
  }
}

}  // namespace

Tensor nll_loss(const Tensor& logp, const Tensor& target) {
  trace::Scope ts("nll_loss", "forward");
  check_dims("nll_loss", "input", logp, 2);
  check_dims("nll_loss", "target", target, 1);
  ENGINE_CHECK(target.dtype() == DType::I64, "nll_loss: target must be int64");
  int64_t n = logp.size(0), c = logp.size(1);
  ENGINE_CHECK(target.size(0) == n, "nll_loss: ", n, " rows of scores, ", target.size(0),
               " targets");
  const Device dev = same_device("nll_loss", logp, {{"target", &target}});
  // The loss stays on the device; a bad target throws here on either device (CUDA's kernel is
  // waited for).
  Tensor loss = Tensor::empty({}, DType::F32, dev);
  call(dev, kc::nll_loss_forward, kg::nll_loss_forward, f(logp), target.data<int64_t>(), f(loss), n,
       c);
  if (ChunkedGradients* cg = ChunkedGradients::current()) {
    chunk_losses(*cg, logp, target);
    record(loss, "NllLossBackward", {logp}, [target, n, c, cg](const Tensor& dloss) {
      check_grad("nll_loss", dloss, Device::cpu());
      check_scope("nll_loss", cg);
      // The global 1/B: a share's own 1/n would give other bits at every world size.
      const float scale = dloss.item() / static_cast<float>(cg->plan().global_batch);
      Tensor dlogp = Tensor::empty({n, c}, DType::F32, Device::cpu());
      kc::nll_loss_backward_scaled(scale, target.data<int64_t>(), f(dlogp), n, c);
      return std::vector<Tensor>{dlogp};
    });
    return loss;
  }
  record(loss, "NllLossBackward", {logp}, [target, n, c, dev](const Tensor& dloss) {
    check_grad("nll_loss", dloss, dev);
    Tensor dlogp = Tensor::empty({n, c}, DType::F32, dev);
    call(dev, kc::nll_loss_backward, kg::nll_loss_backward, f(dloss), target.data<int64_t>(),
         f(dlogp), n, c);
    return std::vector<Tensor>{dlogp};
  });
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  return nll_loss(log_softmax(logits), target);
}

Tensor argmax(const Tensor& x) {
  check_dims("argmax", "input", x, 2);
  const Device dev = x.device();
  Tensor out = Tensor::empty({x.size(0)}, DType::I64, dev);
  call(dev, kc::argmax_rows, kg::argmax_rows, f(x), x.size(0), x.size(1), out.data<int64_t>());
  return out;
}

int64_t correct_count(const Tensor& scores, const Tensor& target) {
  // Counted on the host: scores on a GPU give their argmax (N int64) to the CPU.
  Tensor pred = argmax(scores).to(Device::cpu());
  ENGINE_CHECK(target.numel() == pred.numel(), "correct_count: ", pred.numel(), " predictions, ",
               target.numel(), " targets");
  Tensor tgt = target.to(Device::cpu());
  const int64_t* p = pred.data<int64_t>();
  const int64_t* t = tgt.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) n += p[i] == t[i];
  return n;
}

}  // namespace engine::nn
