// parallel/step_graph.cpp: see step_graph.h.
#include "parallel/step_graph.h"

#include <utility>

#include "core/cuda_backend.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "kernels/dropout.h"

namespace engine::parallel {
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

TrainStepGraph::TrainStepGraph(std::unique_ptr<GraphBackend> backend, Device dev, int64_t batch,
                               int64_t rows, int64_t cols, Generator* dropout)
    : graph_(std::move(backend), batch, kGraphWarmupSteps, dropout) {
  inputs_.images = Tensor::empty({batch, 1, rows, cols}, DType::F32, dev);  // (B, 1, H, W)
  inputs_.labels = Tensor::empty({batch}, DType::I64, dev);                 // (B)
  inputs_.size = batch;
}

Tensor TrainStepGraph::run(const data::DeviceBatch& b, const Step& step,
                           const std::function<void()>& after_replay) {
  StepParts parts;
  parts.eager = [&] { return step(b); };
  parts.load_inputs = [&] {
    inputs_.images.copy_from(b.images);  // on the device: queued, no host wait
    inputs_.labels.copy_from(b.labels);
  };
  parts.on_inputs = [&] { return step(inputs_); };
  parts.after_replay = after_replay;
  return graph_.run(b.size, parts);
}

namespace {

GraphChoice blocked(GraphBlocker b, std::string subject, std::string why) {
  GraphChoice c;
  c.blocker = b;
  c.subject = std::move(subject);
  c.why = std::move(why);
  return c;
}

}  // namespace

GraphChoice step_graph_blocker(const StepSettings& s) {
  using B = GraphBlocker;
  if (!s.cuda) return blocked(B::Cpu, "", "the device is the CPU");
  if (s.data_parallel)
    return blocked(B::DataParallel, "data parallel in one process",
                   "one process drives several devices");
  if (s.world > 1 && s.collectives != "nccl")
    return blocked(B::HostCollectives, "",
                   "the collectives go through the host (" + s.collectives + ")");
  if (s.accumulate > 1)
    return blocked(B::Accumulate,
                   "gradient accumulation over " + std::to_string(s.accumulate) + " batches",
                   "two kinds of step (without and with the optimizer)");
  if (s.nonfinite == NonfiniteMode::Skip)
    return blocked(B::NonfiniteSkip, "skipping non-finite steps", "the host decides each step");
  if (s.sync_bn)
    return blocked(B::SyncBn, "synchronised batch norm", "its all_reduce goes through the host");
  if (is_compression(s.reducer))
    return blocked(B::Compression, "gradient compression " + reducer_kind_name(s.reducer),
                   "host work each step");
  if (s.reducer == ReducerKind::Zero1) return blocked(B::Zero, "ZeRO-1", "its shards' collectives");
  if (s.optimizer != OptimizerKind::Sgd)
    return blocked(B::Optimizer, "Adam", "its step count is a launch argument");
  if (s.trace) return blocked(B::Trace, "tracing", "per-op host timing");
  if (s.profile) return blocked(B::Profile, "profiling", "per-op host timing");
  return {};
}

GraphChoice choose_step_graph(AutoOnOff mode, const StepSettings& s) {
  if (mode == AutoOnOff::Off) return blocked(GraphBlocker::Off, "", "turned off");
  GraphChoice c = step_graph_blocker(s);
  // A captured step with collectives in it has not run on a GPU yet (docs/gpu_bench): auto
  // leaves it eager; on captures it.
  if (c.blocker == GraphBlocker::None && mode == AutoOnOff::Auto && s.world > 1)
    c = blocked(GraphBlocker::Untried,
                "world " + std::to_string(s.world) + " over " + s.collectives,
                "a captured step with collectives has not run on a GPU yet");
  c.on = c.blocker == GraphBlocker::None;
  c.refused = !c.on && mode == AutoOnOff::On;
  return c;
}

DeviceData make_device_data(AutoOnOff mode, const data::MnistSplit& train, Device dev,
                            bool data_parallel) {
  static const char* const kNames[] = {"auto", "on", "off"};  // data::choose_data_on_device's
  const char* name = kNames[static_cast<int>(mode)];
  DeviceData d;
  d.nbytes = data::device_split_nbytes(train);
  const bool cuda = dev.is_cuda() && !data_parallel;
  d.choice = data::choose_data_on_device(
      name, cuda, d.nbytes, cuda && mode == AutoOnOff::Auto ? cuda::free_memory(dev.index) : 0);
  if (data_parallel && mode != AutoOnOff::Off)
    d.choice = {false, mode == AutoOnOff::On, "the batch is cut on the host"};
  if (d.choice.on) d.data = std::make_unique<data::DeviceDataset>(train, dev);
  return d;
}

}  // namespace engine::parallel
