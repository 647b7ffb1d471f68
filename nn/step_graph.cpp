// nn/step_graph.cpp: see step_graph.h.
#include "nn/step_graph.h"

#include <utility>

#include "core/cuda_backend.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "kernels/dropout.h"

namespace engine::nn {
namespace {

class CudaGraphBackend : public GraphBackend {
 public:
  explicit CudaGraphBackend(int device) : graph_(device), device_(device) {
    counter_ = static_cast<uint64_t*>(cuda::alloc(device, sizeof(uint64_t)));
  }
  ~CudaGraphBackend() override { cuda::free(device_, counter_, sizeof(uint64_t)); }
  void begin() override { graph_.begin_capture("the training step"); }
  void end() override { graph_.end_capture(); }
  void abort() noexcept override { graph_.abort_capture(); }
  void replay() override { graph_.replay(); }
  const uint64_t* dropout_base() override { return counter_; }
  void set_dropout_base(uint64_t offset) override { cuda::write_u64(device_, counter_, offset); }

 private:
  cuda::Graph graph_;
  int device_;
  uint64_t* counter_ = nullptr;
};

// Dropout launches of this thread read their offset from base for the scope.
class DropoutOnDevice {
 public:
  DropoutOnDevice(const uint64_t* base, uint64_t host_base)
      : saved_(kernels::dropout_offset_source()) {
    kernels::dropout_offset_source() = {base, host_base};
  }
  ~DropoutOnDevice() { kernels::dropout_offset_source() = saved_; }
  DropoutOnDevice(const DropoutOnDevice&) = delete;
  DropoutOnDevice& operator=(const DropoutOnDevice&) = delete;

 private:
  kernels::DropoutOffsetSource saved_;
};

}  // namespace

std::unique_ptr<GraphBackend> make_cuda_graph_backend(int device) {
  return std::make_unique<CudaGraphBackend>(device);
}

StepGraph::StepGraph(std::unique_ptr<GraphBackend> backend, int64_t batch, int warmup,
                     Generator* dropout)
    : backend_(std::move(backend)), batch_(batch), warmup_(warmup), dropout_(dropout) {
  ENGINE_CHECK(warmup >= 1, "StepGraph: at least one eager step before the capture, got ", warmup);
}

Tensor StepGraph::run(int64_t size, const StepParts& parts) {
  if (size != batch_ || warm_ < warmup_) {
    if (size == batch_) ++warm_;
    last_ = StepRun::Eager;
    return parts.eager();
  }
  if (!captured_) return capture(parts);
  parts.load_inputs();
  if (dropout_) {
    backend_->set_dropout_base(dropout_->offset());
    dropout_->set_state(dropout_->seed(), dropout_->offset() + dropout_per_step_);
  }
  backend_->replay();
  parts.after_replay();
  ++replays_;
  last_ = StepRun::Replayed;
  return loss_;
}

// The step is queued once while the device records it; the host's part of it (counters, the
// generator's reservations) happens now, so this first launch needs no after_replay.
Tensor StepGraph::capture(const StepParts& parts) {
  parts.load_inputs();
  const uint64_t first = dropout_ ? dropout_->offset() : 0;
  backend_->begin();
  try {
    DropoutOnDevice on_device(backend_->dropout_base(), first);
    loss_ = parts.on_inputs();
    backend_->end();
  } catch (...) {
    backend_->abort();
    throw;
  }
  captured_ = true;
  if (dropout_) {
    dropout_per_step_ = dropout_->offset() - first;
    backend_->set_dropout_base(first);  // the generator already stands after this step
  }
  backend_->replay();
  last_ = StepRun::Captured;
  return loss_;
}

std::string step_graph_blocker(const StepSettings& s) {
  if (!s.cuda) return "the device is the CPU";
  if (s.data_parallel) return "--mode dp: one process drives several devices";
  if (s.world > 1 && s.collectives != "nccl")
    return "the collectives go through the host (" + s.collectives +
           "); --backend nccl is "
           "captured";
  if (s.accumulate > 1)
    return "--accumulate " + std::to_string(s.accumulate) +
           ": two kinds of step (without and with the optimizer)";
  if (s.nonfinite == "skip") return "--nonfinite skip: the host decides each step";
  if (s.sync_bn) return "--sync-bn: its all_reduce goes through the host";
  if (s.grad_compression != "none")
    return "--grad-compression " + s.grad_compression + ": host work each step";
  if (s.zero != 0) return "--zero " + std::to_string(s.zero) + ": its shards' collectives";
  if (s.optimizer != "sgd")
    return "--optimizer " + s.optimizer + ": its step count is a launch argument";
  if (s.trace) return "--trace: per-op host timing";
  if (s.profile) return "--profile: per-op host timing";
  return "";
}

GraphChoice choose_step_graph(const std::string& flag, const StepSettings& s) {
  GraphChoice c;
  if (flag == "off") {
    c.reason = "--cuda-graph off";
    return c;
  }
  ENGINE_CHECK(flag == "auto" || flag == "on", "--cuda-graph must be auto, on or off, got '", flag,
               "'");
  c.reason = step_graph_blocker(s);
  // A captured step with collectives in it has not run on a GPU yet (docs/gpu_bench): auto
  // leaves it eager; on captures it.
  if (c.reason.empty() && flag == "auto" && s.world > 1)
    c.reason = "world " + std::to_string(s.world) + " over " + s.collectives +
               ": a captured step with collectives has not run on a GPU yet (--cuda-graph on "
               "captures it)";
  c.on = c.reason.empty();
  c.refused = !c.on && flag == "on";
  return c;
}

}  // namespace engine::nn
