// nn/optim.cpp: SGD and Adam over a model's parameters, on the parameters' device.
#include "nn/optim.h"

#include <vector>

#include "core/error.h"
#include "kernels/choice.h"
#include "kernels/cpu/optim.h"
#include "kernels/cuda/ops.h"
#include "kernels/dispatch.h"

namespace engine::nn {
namespace {

// Finds a named state tensor, checking its shape against the parameter it belongs to.
Tensor find_state(const NamedTensors& state, const std::string& key, const Tensor& param) {
  for (auto& [n, t] : state) {
    if (n != key) continue;
    ENGINE_CHECK(t.shape() == param.shape(), "optimizer state '", key, "' has shape ",
                 shape_str(t.shape()), ", parameter has ", shape_str(param.shape()));
    Tensor c = Tensor::empty(param.shape(), DType::F32, param.device());
    c.copy_from(t);
    return c;
  }
  return Tensor();
}

// The gradient must be where the parameter is; the step runs there (kernels::call picks
// kernels/cpu or kernels/cuda).
void check_grad(const Tensor& p, const Tensor& g, const std::string& name) {
  ENGINE_CHECK(g.device() == p.device(), "optimizer: parameter '", name, "' is on ",
               p.device().str(), ", its gradient on ", g.device().str());
  ENGINE_CHECK(g.numel() == p.numel(), "optimizer: parameter '", name, "' has shape ",
               shape_str(p.shape()), ", its gradient ", shape_str(g.shape()));
}

// The fused multi-tensor step (one call; on CUDA one launch) is taken on the CPU always, on CUDA
// only with the engine's own kernels chosen (kernels/choice.h: not yet run on a GPU), and only
// when every parameter with a gradient is on one device.
bool fused(const std::vector<Device>& devs) {
  for (const Device& d : devs)
    if (d != devs[0]) return false;
  return !devs.empty() &&
         (devs[0].is_cpu() || kernels::cuda_kernels() == kernels::CudaKernels::Engine);
}

}  // namespace

void Optimizer::zero_grad() {
  for (auto& [n, p] : params_) p.set_grad(Tensor());
}

SGD::SGD(NamedTensors params, kernels::SgdConfig cfg)
    : Optimizer(std::move(params)), cfg_(cfg), momentum_(params_.size()) {}

void SGD::step() {
  std::vector<kernels::OptimTensor> ts;  // the parameters with a gradient, on devs
  std::vector<Device> devs;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& [name, p] = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    check_grad(p, g, name);
    bool first = !momentum_[i].defined();
    if (first && cfg_.momentum != 0.0)
      momentum_[i] = Tensor::empty(p.shape(), DType::F32, p.device());
    float* buf = cfg_.momentum != 0.0 ? momentum_[i].data<float>() : nullptr;
    ts.push_back({p.data<float>(), g.data<float>(), buf, nullptr, p.numel(), first});
    devs.push_back(p.device());
  }
  if (fused(devs)) {
    kernels::call(devs[0], kernels::cpu::sgd_step_multi, kernels::cuda::sgd_step_multi, ts.data(),
                  static_cast<int64_t>(ts.size()), cfg_);
  } else {
    for (size_t k = 0; k < ts.size(); ++k) {
      const kernels::OptimTensor& t = ts[k];
      kernels::call(devs[k], kernels::cpu::sgd_step, kernels::cuda::sgd_step, t.param, t.grad,
                    t.buf, t.count, cfg_, t.first);
    }
  }
  ++steps_;
}

NamedTensors SGD::state() const {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined())
      out.emplace_back(params_[i].first + ".momentum_buffer", momentum_[i]);
  return out;
}

void SGD::load_state(const NamedTensors& state, int64_t steps) {
  for (size_t i = 0; i < params_.size(); ++i)
    momentum_[i] = find_state(state, params_[i].first + ".momentum_buffer", params_[i].second);
  steps_ = steps;
}

Adam::Adam(NamedTensors params, kernels::AdamConfig cfg)
    : Optimizer(std::move(params)),
      cfg_(cfg),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()) {}

void Adam::step() {
  ++steps_;
  std::vector<kernels::OptimTensor> ts;  // the parameters with a gradient, on devs
  std::vector<Device> devs;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& [name, p] = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    check_grad(p, g, name);
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = Tensor::zeros(p.shape(), DType::F32, p.device());
      exp_avg_sq_[i] = Tensor::zeros(p.shape(), DType::F32, p.device());
    }
    ts.push_back({p.data<float>(), g.data<float>(), exp_avg_[i].data<float>(),
                  exp_avg_sq_[i].data<float>(), p.numel(), false});
    devs.push_back(p.device());
  }
  if (fused(devs)) {
    kernels::call(devs[0], kernels::cpu::adam_step_multi, kernels::cuda::adam_step_multi, ts.data(),
                  static_cast<int64_t>(ts.size()), cfg_, steps_);
    return;
  }
  for (size_t k = 0; k < ts.size(); ++k) {
    const kernels::OptimTensor& t = ts[k];
    kernels::call(devs[k], kernels::cpu::adam_step, kernels::cuda::adam_step, t.param, t.grad,
                  t.buf, t.buf2, t.count, cfg_, steps_);
  }
}

NamedTensors Adam::state() const {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    out.emplace_back(params_[i].first + ".exp_avg", exp_avg_[i]);
    out.emplace_back(params_[i].first + ".exp_avg_sq", exp_avg_sq_[i]);
  }
  return out;
}

void Adam::load_state(const NamedTensors& state, int64_t steps) {
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i] = find_state(state, params_[i].first + ".exp_avg", params_[i].second);
    exp_avg_sq_[i] = find_state(state, params_[i].first + ".exp_avg_sq", params_[i].second);
  }
  steps_ = steps;
}

}  // namespace engine::nn
