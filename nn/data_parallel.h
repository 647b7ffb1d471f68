// nn/data_parallel.h: DataParallel, the single-process torch.nn.DataParallel of the tutorials.
// One process drives every device: each forward cuts the batch along dim 0 into one chunk per
// device, refreshes a replica of the model on each device from the module's parameters and
// buffers, runs every replica on its chunk, and concatenates the outputs on the first device,
// autograd-connected to every replica. After backward, reduce_gradients() adds the replicas'
// gradients into the module's (PyTorch does that sum inside backward, through its Broadcast
// function; here the replicas' parameters are leaves of their own and the sum is one call).
//
//   nn::DataParallel dp(*model, {Device::cuda(0), Device::cuda(1)},
//                       nn::model_factory("simplecnn", opts), seed);
//   Tensor out = dp.forward(images);            // (N, 10) on cuda:0
//   Tensor loss = model->loss(out, labels);     // labels on cuda:0
//   optimizer.zero_grad(); loss.backward(); dp.reduce_gradients(); optimizer.step();
//
// Semantics, as PyTorch's:
// - The module is replica 0: it runs chunk 0 itself, so its grad-ready hooks fire in backward
//   before the other replicas' gradients are added; in-place buffer updates (BatchNorm running
//   statistics) survive only on it, computed from chunk 0 alone. Other replicas get the module's
//   parameters, buffers and train/eval mode (the module's own flag, applied recursively) at every
//   forward; what they change is overwritten next time.
// - BatchNorm in train mode normalises each chunk with its own statistics, so the output differs
//   from the module's on the whole batch; eval mode matches.
// - Dropout: replica 0 draws from the module's own generator; replica i >= 1 from a generator of
//   DataParallel's, seeded from (dropout_seed, i), so chunks never share masks. Those generators'
//   states (replica_dropout_offsets()) belong in a checkpoint for a bit-exact resume.
// - Chunks: torch's scatter (Tensor.chunk): ceil(N / k) rows each, the last smaller; with N < k
//   (or uneven sizes) the last devices get no chunk and their replicas sit out that step.
// - Gradients of several backward passes before one reduce_gradients() add up, as in one module
//   (gradient accumulation). reduce_gradients() moves the replicas' gradients into the module's
//   and clears them; zero_grad() clears everyone's, e.g. for a step skipped before the reduce.
// - A replica's parameters are overwritten in place at each forward: run the backward of one
//   forward before the optimizer step and the next forward (the usual loop does).
// The replicas run one after another from the calling thread. On CUDA devices kernels are queued
// asynchronously, so the devices still compute concurrently; on the CPU they take turns (each
// using the whole thread pool).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "nn/models.h"

namespace engine::nn {

// Builds one replica of the module: the same state_dict names, shapes and dtypes. Its parameters
// are overwritten from the module before use, so what it draws from init_gen does not matter;
// its dropout layers must draw from dropout_gen (kept alive by DataParallel).
using ReplicaFactory =
    std::function<std::unique_ptr<Model>(Generator& init_gen, Generator& dropout_gen)>;

// The factory for make_model(name, opts, ...): replicas of a model that make_model built.
ReplicaFactory model_factory(const std::string& name, const ModelOptions& opts = {});

class DataParallel {
 public:
  // module lives on devices[0] and is the replica of devices[0]. devices: 1..N, may repeat (e.g.
  // {cpu, cpu}), all CUDA or all CPU; CUDA devices must answer. Builds one replica per further
  // device with make_replica and moves it there. Throws engine::Error on bad devices, a module
  // not on devices[0], or a factory whose model does not match the module.
  DataParallel(Model& module, std::vector<Device> devices, const ReplicaFactory& make_replica,
               uint64_t dropout_seed = 0);
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // input (N, ...) with N >= 1, on any device -> the module's output for the whole batch on
  // devices[0], its autograd graph reaching every replica that ran (and input, if it requires
  // grad).
  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // After backward: module's parameter grads += every other replica's grads (copied to
  // devices[0]); the replicas' grads are then cleared. Parameters whose replicas got no gradient
  // are left alone.
  void reduce_gradients();
  // Clears the gradients of the module and of every replica.
  void zero_grad();

  const std::vector<Device>& devices() const { return devices_; }
  Model& module() { return module_; }
  // Replica i on devices()[i]; replica 0 is the module.
  Model& replica(size_t i);
  // The dropout generator of replica i >= 1 (replica 0 uses the module's own).
  Generator& dropout_generator(size_t i);
  // What a checkpoint keeps of the replicas' dropout streams: the offsets of replicas 1..N-1,
  // [i - 1] for replica i (their seeds follow from the constructor's dropout_seed). Restoring
  // sets replica i from offsets[i - 1]; replicas beyond the list keep theirs, extra entries are
  // ignored (a checkpoint of another device count).
  std::vector<uint64_t> replica_dropout_offsets() const;
  void restore_replica_dropout_offsets(const std::vector<uint64_t>& offsets);

  // Rows per chunk when n rows are scattered over k devices (torch's Tensor.chunk): ceil(n / k)
  // each, the last smaller; fewer than k chunks when they run out.
  static std::vector<int64_t> chunk_sizes(int64_t n, size_t k);

 private:
  struct Replica {
    std::unique_ptr<Generator> dropout_gen;  // stable address: the model's layers refer to it
    std::unique_ptr<Model> model;
    std::vector<Tensor> params, buffers;  // in the module's order
  };
  void check_module_device() const;
  void refresh(Replica& r);  // module's parameters, buffers and mode -> r

  Model& module_;
  std::vector<Device> devices_;
  NamedTensors module_params_, module_buffers_;
  std::vector<Replica> replicas_;  // replicas_[i - 1] runs on devices_[i]
};

}  // namespace engine::nn
