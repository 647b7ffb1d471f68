// nn/data_parallel.cpp: scatter (narrow0 + to_device), replicate (copies of the module's state
// into replicas built once), parallel apply (one replica after another), gather (cat0) and the
// gradient reduction onto devices[0].
#include "nn/data_parallel.h"

#include <string>
#include <utility>

#include "core/autograd.h"
#include "core/error.h"
#include "core/trace.h"
#include "nn/parallel_ops.h"

namespace engine::nn {
namespace {

// SplitMix64's finaliser: replica i's dropout seed, unrelated to dropout_seed's own stream.
uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string device_list(const std::vector<Device>& ds) {
  std::string s;
  for (const Device& d : ds) s += (s.empty() ? "" : ", ") + d.str();
  return "{" + s + "}";
}

void check_devices(const std::vector<Device>& ds) {
  ENGINE_CHECK(!ds.empty(), "DataParallel: no devices given (need at least one)");
  for (const Device& d : ds)
    ENGINE_CHECK(d.kind == ds[0].kind, "DataParallel: devices must be all CUDA or all CPU, got ",
                 device_list(ds));
  if (ds[0].is_cpu()) return;
  for (const Device& d : ds)
    check_cuda_device(d.index,
                      "DataParallel: " + d.str() + " in " + device_list(ds) + " is not available");
}

// The replica's entries must be the module's: same names, shapes and dtypes, same order.
std::vector<Tensor> matching(const NamedTensors& want, const NamedTensors& got, const char* what,
                             size_t replica) {
  ENGINE_CHECK(want.size() == got.size(), "DataParallel: replica ", replica, " has ", got.size(),
               " ", what, ", the module ", want.size(), " (the factory builds another model)");
  std::vector<Tensor> out;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [wn, wt] = want[i];
    const auto& [gn, gt] = got[i];
    ENGINE_CHECK(wn == gn && wt.shape() == gt.shape() && wt.dtype() == gt.dtype(),
                 "DataParallel: replica ", replica, "'s ", what, " ", i, " is ", gn, " ",
                 shape_str(gt.shape()), " ", dtype_name(gt.dtype()), ", the module's ", wn, " ",
                 shape_str(wt.shape()), " ", dtype_name(wt.dtype()),
                 " (the factory builds another model)");
    out.push_back(gt);
  }
  return out;
}

}  // namespace

ReplicaFactory model_factory(const std::string& name, const ModelOptions& opts) {
  return [name, opts](Generator& init_gen, Generator& dropout_gen) {
    return make_model(name, opts, init_gen, dropout_gen);
  };
}

std::vector<int64_t> DataParallel::chunk_sizes(int64_t n, size_t k) {
  ENGINE_CHECK(n >= 0 && k >= 1, "DataParallel: cannot split ", n, " rows over ", k, " devices");
  std::vector<int64_t> sizes;
  const int64_t per = (n + static_cast<int64_t>(k) - 1) / static_cast<int64_t>(k);
  for (int64_t start = 0; start < n; start += per) sizes.push_back(std::min(per, n - start));
  return sizes;
}

DataParallel::DataParallel(Model& module, std::vector<Device> devices,
                           const ReplicaFactory& make_replica, uint64_t dropout_seed)
    : module_(module), devices_(std::move(devices)) {
  check_devices(devices_);
  module_params_ = module_.named_parameters();
  module_buffers_ = module_.named_buffers();
  check_module_device();
  ENGINE_CHECK(devices_.size() == 1 || make_replica, "DataParallel: no replica factory for ",
               devices_.size(), " devices");
  Generator init_gen(dropout_seed);  // replicas' initial values are overwritten: any draws do
  for (size_t i = 1; i < devices_.size(); ++i) {
    Replica r;
    r.dropout_gen = std::make_unique<Generator>(mix(dropout_seed, i));
    r.model = make_replica(init_gen, *r.dropout_gen);
    ENGINE_CHECK(r.model, "DataParallel: the replica factory returned no model");
    r.params = matching(module_params_, r.model->named_parameters(), "parameter", i);
    r.buffers = matching(module_buffers_, r.model->named_buffers(), "buffer", i);
    r.model->to(devices_[i]);
    replicas_.push_back(std::move(r));
  }
}

void DataParallel::check_module_device() const {
  for (const NamedTensors* list : {&module_params_, &module_buffers_})
    for (const auto& [name, t] : *list)
      ENGINE_CHECK(t.device() == devices_[0], "DataParallel: the module's ", name, " is on ",
                   t.device().str(), ", not on devices[0] = ", devices_[0].str(),
                   " (call module.to(", devices_[0].str(), ") first)");
}

Model& DataParallel::replica(size_t i) {
  ENGINE_CHECK(i < devices_.size(), "DataParallel: replica ", i, " of ", devices_.size());
  return i == 0 ? module_ : *replicas_[i - 1].model;
}

Generator& DataParallel::dropout_generator(size_t i) {
  ENGINE_CHECK(i >= 1 && i < devices_.size(), "DataParallel: replica ", i,
               " has no generator of ours (replica 0 uses the module's; there are ",
               devices_.size(), " replicas)");
  return *replicas_[i - 1].dropout_gen;
}

std::vector<uint64_t> DataParallel::replica_dropout_offsets() const {
  std::vector<uint64_t> out;
  for (const Replica& r : replicas_) out.push_back(r.dropout_gen->offset());
  return out;
}

void DataParallel::restore_replica_dropout_offsets(const std::vector<uint64_t>& offsets) {
  for (size_t i = 0; i < offsets.size() && i < replicas_.size(); ++i)
    replicas_[i].dropout_gen->set_state(replicas_[i].dropout_gen->seed(), offsets[i]);
}

void DataParallel::refresh(Replica& r) {
  NoGradGuard no_grad;
  for (size_t p = 0; p < r.params.size(); ++p) {
    const Tensor& src = module_params_[p].second;
    r.params[p].copy_from(src);
    if (r.params[p].requires_grad() != src.requires_grad())
      r.params[p].set_requires_grad(src.requires_grad());
  }
  for (size_t b = 0; b < r.buffers.size(); ++b) r.buffers[b].copy_from(module_buffers_[b].second);
  r.model->train(module_.is_training());
}

Tensor DataParallel::forward(const Tensor& input) {
  trace::Scope ts("DataParallel", "forward");
  ENGINE_CHECK(input.defined(), "DataParallel: the input is undefined");
  ENGINE_CHECK(input.dim() >= 1 && input.size(0) >= 1,
               "DataParallel: the input must be a batch (N, ...) with N >= 1, got shape ",
               shape_str(input.shape()));
  check_module_device();
  const std::vector<int64_t> sizes = chunk_sizes(input.size(0), devices_.size());
  std::vector<Tensor> outputs;
  int64_t start = 0;
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (j > 0) refresh(replicas_[j - 1]);
    Tensor chunk = to_device(narrow0(input, start, sizes[j]), devices_[j]);
    Tensor out = replica(j)(chunk);
    ENGINE_CHECK(out.defined() && out.dim() >= 1 && out.size(0) == sizes[j],
                 "DataParallel: replica ", j, " returned ",
                 out.defined() ? shape_str(out.shape()) : "nothing", " for a chunk of ", sizes[j],
                 " rows (outputs are gathered along dim 0)");
    outputs.push_back(std::move(out));
    start += sizes[j];
  }
  if (outputs.size() == 1 && outputs[0].device() == devices_[0]) return outputs[0];
  return cat0(outputs, devices_[0]);
}

void DataParallel::reduce_gradients() {
  trace::Scope ts("DataParallel reduce_gradients", "comm");
  NoGradGuard no_grad;
  for (Replica& r : replicas_) {
    for (size_t p = 0; p < r.params.size(); ++p) {
      Tensor g = r.params[p].grad();
      if (!g.defined()) continue;
      r.params[p].set_grad(Tensor());  // the replica's gradient is handed over, never reused
      Tensor target = module_params_[p].second;
      if (!target.requires_grad()) continue;
      Tensor g0 = g.to(devices_[0]);  // g itself on the same device: it is ours now
      if (target.grad().defined())
        target.grad().add_(g0);
      else
        target.set_grad(g0);
    }
  }
}

void DataParallel::zero_grad() {
  module_.zero_grad();
  for (Replica& r : replicas_) r.model->zero_grad();
}

}  // namespace engine::nn
