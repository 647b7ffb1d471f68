// nn/module.cpp: the recursive walks over parameters, buffers and children.
#include "nn/module.h"

#include <atomic>

#include "core/autograd.h"
#include "core/error.h"
#include "core/trace.h"

namespace engine::nn {
namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_flops{0};

}  // namespace

FlopCount::FlopCount() {
  ENGINE_CHECK(!g_counting.exchange(true), "FlopCount: one counts at a time");
  g_flops = 0;
}

FlopCount::~FlopCount() {
  g_counting = false;
}

int64_t FlopCount::total() const {
  return g_flops.load();
}

void Module::collect(const std::string& prefix, bool params, bool buffers,
                     NamedTensors* out) const {
  if (params)
    for (auto& [n, t] : params_) out->emplace_back(prefix + n, t);
  if (buffers)
    for (auto& [n, t] : buffers_) out->emplace_back(prefix + n, t);
  for (auto& [n, m] : children_) m->collect(prefix + n + ".", params, buffers, out);
}

Tensor Module::operator()(const Tensor& x) {
  const bool counting = g_counting.load(std::memory_order_relaxed);
  if (!counting && !trace::enabled()) return forward(x);
  const int64_t f = flops(x), bwd = f * (x.requires_grad() || x.grad_fn() ? 2 : 1);
  if (counting) g_flops += f + bwd;
  if (!trace::enabled()) return forward(x);
  trace::Scope ts(path_.empty() ? std::string_view("model") : std::string_view(path_), "forward");
  if (f) ts.arg("flops", f).arg("bwd_flops", bwd);
  Tensor y = forward(x);
  // A leaf layer's output node is that layer's backward: label it for traces and profiles.
  if (children_.empty() && y.grad_fn()) y.grad_fn()->label = path_;
  return y;
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [n, m] : children_) m->set_path(path + "." + n);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, false, &out);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, true, &out);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, &out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::to(Device d) {
  // The TensorImpl stays (layers and optimizers hold handles to it); its storage moves.
  auto move = [&](Tensor& t) {
    if (t.device() == d) return;
    Tensor moved = t.to(d);
    t.impl()->storage = moved.impl()->storage;
    t.impl()->offset_bytes = 0;
    t.set_grad(Tensor());
  };
  for (auto& [n, t] : params_) move(t);
  for (auto& [n, t] : buffers_) move(t);
  for (auto& [n, m] : children_) m->to(d);
}

void Module::zero_grad() {
  for (auto& [n, t] : params_) t.set_grad(Tensor());
  for (auto& [n, m] : children_) m->zero_grad();
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  t.set_requires_grad(true);
  t.impl()->name = name;
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, t);
  return t;
}

}  // namespace engine::nn
