// apps/train/step_graph.cpp: see step_graph.h.
#include "apps/train/step_graph.h"

#include <cstdio>

#include "apps/flags.h"
#include "apps/train/trainer.h"
#include "core/cuda_backend.h"

namespace engine::apps {

nn::StepSettings step_settings(const TrainConfig& c, Device dev, int world,
                               const std::string& collectives) {
  nn::StepSettings s;
  s.cuda = dev.is_cuda();
  s.data_parallel = c.mode == "dp";
  s.world = world;
  s.collectives = collectives;
  s.nonfinite = c.nonfinite;
  s.optimizer = c.optimizer;
  s.grad_compression = c.grad_compression;
  s.sync_bn = c.sync_bn;
  s.trace = !c.trace.empty();
  s.profile = c.profile;
  s.accumulate = c.accumulate;
  s.zero = c.zero;
  return s;
}

TrainStepGraph::TrainStepGraph(std::unique_ptr<nn::GraphBackend> backend, Device dev, int64_t batch,
                               int64_t rows, int64_t cols, Generator* dropout, bool say)
    : graph_(std::move(backend), batch, kGraphWarmupSteps, dropout), say_(say) {
  inputs_.images = Tensor::empty({batch, 1, rows, cols}, DType::F32, dev);  // (B, 1, H, W)
  inputs_.labels = Tensor::empty({batch}, DType::I64, dev);                 // (B)
  inputs_.size = batch;
}

Tensor TrainStepGraph::run(const data::DeviceBatch& b, const Step& step,
                           const std::function<void()>& after_replay) {
  nn::StepParts parts;
  parts.eager = [&] { return step(b); };
  parts.load_inputs = [&] {
    inputs_.images.copy_from(b.images);  // on the device: queued, no host wait
    inputs_.labels.copy_from(b.labels);
  };
  parts.on_inputs = [&] { return step(inputs_); };
  parts.after_replay = after_replay;
  Tensor loss = graph_.run(b.size, parts);
  if (say_ && graph_.last() == nn::StepRun::Captured) {
    std::printf("CUDA graph: on (captured after %d warm-up steps)\n", graph_.warmup());
    std::fflush(stdout);
  }
  return loss;
}

std::unique_ptr<TrainStepGraph> make_train_step_graph(const TrainConfig& c,
                                                      const nn::StepSettings& s, int rank,
                                                      Device dev, int64_t batch, int64_t rows,
                                                      int64_t cols, Generator* dropout) {
  const nn::GraphChoice choice = choose_step_graph(c.cuda_graph, s);
  ENGINE_USAGE_CHECK(!choice.refused,
                     "--cuda-graph on: the step cannot be captured: ", choice.reason,
                     " (--cuda-graph auto runs it eagerly)");
  if (!choice.on) {
    if (rank == 0 && c.cuda_graph != "off" && dev.is_cuda())  // auto on the CPU: nothing to say
      std::printf("CUDA graph: off (%s)\n", choice.reason.c_str());
    return nullptr;
  }
  return std::make_unique<TrainStepGraph>(nn::make_cuda_graph_backend(dev.index), dev, batch, rows,
                                          cols, dropout, rank == 0);
}

std::unique_ptr<data::DeviceDataset> make_device_data(const TrainConfig& c,
                                                      const data::MnistSplit& train, Device dev,
                                                      bool data_parallel, int rank) {
  const size_t need = data::device_split_nbytes(train);
  const bool cuda = dev.is_cuda() && !data_parallel;
  data::DataOnDeviceChoice d = data::choose_data_on_device(
      c.data_on_device, cuda, need,
      cuda && c.data_on_device == "auto" ? cuda::free_memory(dev.index) : 0);
  if (data_parallel && c.data_on_device != "off")
    d.reason = "--mode dp: the batch is cut on the host", d.refused = c.data_on_device == "on";
  ENGINE_USAGE_CHECK(!d.refused, "--data-on-device on: ", d.reason);
  if (!d.on) {
    if (rank == 0 && c.data_on_device != "off" && dev.is_cuda())
      std::printf("Data on device: off (%s)\n", d.reason.c_str());
    return nullptr;
  }
  auto data = std::make_unique<data::DeviceDataset>(train, dev);
  if (rank == 0)
    std::printf("Data on device: on (%zu MiB; each batch gathered there from its indices)\n",
                need >> 20);
  return data;
}

nn::StepSettings Trainer::graph_settings() const {
  std::string collectives;
  if (comm_)
    collectives = c_.backend == "ring" ? "ring over " + comm_->transport_kind() : c_.backend;
  return step_settings(c_, device_, world_, collectives);
}

// Under a graph every step is a group's first and last (--accumulate 1) and --nonfinite skip is
// off: a replayed step always steps.
Tensor Trainer::graphed_step(const data::DeviceBatch& b, const MicroBatch& m, bool* took) {
  if (!graph_) return step(b, m, took);
  *took = true;
  return graph_->run(
      b, [&](const data::DeviceBatch& x) { return step(x, m, took); },
      [&] {
        ++pos_.step;
        opt_->count_replayed_step();
        if (guard_) guard_->replayed(pos_.step);
      });
}

}  // namespace engine::apps
