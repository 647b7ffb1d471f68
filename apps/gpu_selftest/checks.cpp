// apps/gpu_selftest/checks.cpp: see checks.h. Every check computes the same thing on the CPU and
// on the device from the same inputs and compares outputs and gradients.
#include "apps/gpu_selftest/checks.h"

#include <cmath>
#include <exception>
#include <functional>
#include <memory>

#include "comm/mem_store.h"
#include "comm/nccl_communicator.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "nn/functional.h"
#include "nn/models.h"
#include "nn/optim.h"

namespace engine::selftest {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor random(const Shape& s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Generator g(seed);
  std::vector<float> v(shape_numel(s));
  for (float& x : v) x = g.uniform(lo, hi);
  return Tensor::from_vector(v, s);
}

double rel_error(const Tensor& got, const Tensor& want) {
  std::vector<float> g = got.to_vector(), w = want.to_vector();
  if (g.size() != w.size()) return INFINITY;
  double scale = 1e-30, err = 0;
  for (float v : w) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < g.size(); ++i) {
    const double d = std::fabs(static_cast<double>(g[i]) - w[i]);
    if (std::isnan(d)) return INFINITY;
    err = std::max(err, d);
  }
  return err / scale;
}

// Runs `body`, which returns the error; any exception is a failure with its message.
CheckResult run_check(const std::string& group, const std::string& name, double tol,
                      const std::function<double()>& body) {
  CheckResult r{group, name, false, 0, tol, ""};
  try {
    r.error = body();
    r.passed = r.error <= tol;
    if (!r.passed) r.detail = "error above tolerance";
  } catch (const std::exception& e) {
    r.error = INFINITY;
    r.detail = e.what();
  }
  return r;
}

// f on CPU leaves and on their copies on dev: the largest error of the output and gradients.
double op_error(Device dev, const Fn& f, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> cpu, gpu;
  for (const Tensor& t : inputs) {
    Tensor c = t.detach().clone(), d = t.detach().to(dev);
    if (t.dtype() == DType::F32) {
      c.set_requires_grad(true);
      d.set_requires_grad(true);
    }
    cpu.push_back(c);
    gpu.push_back(d);
  }
  Tensor yc = f(cpu), yd = f(gpu);
  double err = rel_error(yd, yc);
  if (!yc.requires_grad()) return err;
  Tensor r = random(yc.shape(), 99);
  yc.backward(r);
  yd.backward(r.to(dev));
  for (size_t k = 0; k < cpu.size(); ++k)
    if (cpu[k].requires_grad()) err = std::max(err, rel_error(gpu[k].grad(), cpu[k].grad()));
  return err;
}

}  // namespace

std::vector<CheckResult> run_op_checks(Device dev) {
  std::vector<CheckResult> out;
  auto op = [&](const std::string& name, double tol, const Fn& f, std::vector<Tensor> in) {
    out.push_back(run_check("op", name, tol, [&] { return op_error(dev, f, in); }));
  };
  Tensor target = Tensor::from_vector_i64({3, 0, 9, 9, 1, 4, 2, 7}, {8});
  op("linear", 1e-5, [](auto& in) { return nn::linear(in[0], in[1], in[2]); },
     {random({8, 784}, 1), random({10, 784}, 2), random({10}, 3)});
  op("conv2d 5x5", 1e-5, [](auto& in) { return nn::conv2d(in[0], in[1], in[2], 1, 0); },
     {random({8, 1, 28, 28}, 4), random({10, 1, 5, 5}, 5), random({10}, 6)});
  op("conv2d 3x3 s2 p1", 1e-5, [](auto& in) { return nn::conv2d(in[0], in[1], in[2], 2, 1); },
     {random({4, 16, 14, 14}, 7), random({32, 16, 3, 3}, 8), random({32}, 9)});
  op("relu", 0, [](auto& in) { return nn::relu(in[0]); }, {random({8, 500}, 10)});
  op("max_pool2d", 1e-6, [](auto& in) { return nn::max_pool2d(in[0], 2, 2); },
     {random({8, 10, 24, 24}, 11)});
  op("dropout", 0,
     [](auto& in) {
       Generator g(1);
       return nn::dropout(in[0], 0.5f, true, g);
     },
     {random({8, 500}, 12)});
  op("dropout2d", 0,
     [](auto& in) {
       Generator g(2);
       return nn::dropout2d(in[0], 0.5f, true, g);
     },
     {random({8, 20, 8, 8}, 13)});
  {
    Tensor rm = Tensor::zeros({16}), rv = Tensor::full({16}, 1.f);
    Tensor rm_d = rm.to(dev), rv_d = rv.to(dev);
    op("batch_norm2d train", 1e-5,
       [&](auto& in) {
         const bool on_cpu = in[0].device().is_cpu();
         return nn::batch_norm2d(in[0], in[1], in[2], on_cpu ? rm : rm_d, on_cpu ? rv : rv_d, true);
       },
       {random({8, 16, 12, 12}, 14), random({16}, 15), random({16}, 16)});
    out.push_back(run_check("op", "batch_norm2d running stats", 1e-6,
                            [&] { return std::max(rel_error(rm_d, rm), rel_error(rv_d, rv)); }));
    op("batch_norm2d eval", 1e-5,
       [&](auto& in) {
         const bool on_cpu = in[0].device().is_cpu();
         return nn::batch_norm2d(in[0], in[1], in[2], on_cpu ? rm : rm_d, on_cpu ? rv : rv_d,
                                 false);
       },
       {random({8, 16, 12, 12}, 17), random({16}, 18), random({16}, 19)});
  }
  op("log_softmax", 1e-6, [](auto& in) { return nn::log_softmax(in[0]); }, {random({8, 10}, 20)});
  op("cross_entropy", 1e-6, [](auto& in) { return nn::cross_entropy(in[0], in[1]); },
     {random({8, 10}, 21), target});
  out.push_back(run_check("op", "argmax / correct_count", 0, [&] {
    Tensor s = random({8, 10}, 22);
    const bool same = nn::argmax(s.to(dev)).to_vector_i64() == nn::argmax(s).to_vector_i64() &&
                      nn::correct_count(s.to(dev), target.to(dev)) == nn::correct_count(s, target);
    return same ? 0.0 : 1.0;
  }));
  return out;
}

std::vector<CheckResult> run_model_checks(Device dev) {
  std::vector<CheckResult> out;
  for (const std::string name : {"simplecnn", "convnet", "net", "linear"}) {
    out.push_back(run_check("model", name + ": one SGD step", 1e-4, [&] {
      Generator ig_c(7), dg_c(8), ig_d(7), dg_d(8);
      auto mc = nn::make_model(name, {}, ig_c, dg_c);
      auto md = nn::make_model(name, {}, ig_d, dg_d);
      md->to(dev);
      Tensor x = random({16, 1, 28, 28}, 30, 0.f, 1.f);
      std::vector<int64_t> t(16);
      for (int i = 0; i < 16; ++i) t[i] = (i * 3) % 10;
      Tensor target = Tensor::from_vector_i64(t, {16});
      auto step = [&](nn::Model& m, const Tensor& xb, const Tensor& tb) {
        kernels::SgdConfig c;
        c.lr = 0.05;
        c.momentum = 0.9;
        nn::SGD opt(m.named_parameters(), c);
        m.train();
        Tensor loss = m.loss(m(xb), tb);
        loss.backward();
        opt.step();
        return loss.item();
      };
      const float lc = step(*mc, x, target), ld = step(*md, x.to(dev), target.to(dev));
      double err = std::fabs(ld - lc) / std::max(1.f, std::fabs(lc));
      auto sc = mc->state_dict(), sd = md->state_dict();
      for (size_t i = 0; i < sc.size() && i < sd.size(); ++i)
        if (sc[i].second.dtype() == DType::F32)
          err = std::max(err, rel_error(sd[i].second, sc[i].second));
      return err;
    }));
  }
  return out;
}

std::vector<CheckResult> run_nccl_checks(Device dev) {
  std::vector<CheckResult> out;
  std::unique_ptr<comm::NcclCommunicator> nccl;
  out.push_back(run_check("nccl", "init (world 1, unique id via store)", 0, [&] {
    nccl = std::make_unique<comm::NcclCommunicator>(std::make_shared<comm::MemStore>(), 0, 1,
                                                    dev.index);
    return 0.0;
  }));
  if (!nccl) return out;
  const std::vector<float> v{1.f, -2.f, 3.5f, 0.25f, 7.f};
  out.push_back(run_check("nccl", "all_reduce sum", 0, [&] {
    Tensor t = Tensor::from_vector(v, {5}, dev);
    nccl->all_reduce(t, comm::ReduceOp::SUM);
    return rel_error(t, Tensor::from_vector(v, {5}));
  }));
  out.push_back(run_check("nccl", "all_reduce avg", 0, [&] {
    Tensor t = Tensor::from_vector(v, {5}, dev);
    nccl->all_reduce(t, comm::ReduceOp::AVG);
    return rel_error(t, Tensor::from_vector(v, {5}));
  }));
  out.push_back(run_check("nccl", "broadcast / all_gather / reduce_scatter", 0, [&] {
    Tensor t = Tensor::from_vector(v, {5}, dev), g = Tensor::zeros({5}, DType::F32, dev);
    nccl->broadcast(t, 0);
    nccl->all_gather(t, g);
    Tensor rs = Tensor::zeros({5}, DType::F32, dev);
    nccl->reduce_scatter(g, rs);
    return std::max(rel_error(g, Tensor::from_vector(v, {5})),
                    rel_error(rs, Tensor::from_vector(v, {5})));
  }));
  return out;
}

}  // namespace engine::selftest
