// parallel/train_step.cpp: see train_step.h.
#include "parallel/train_step.h"

#include <optional>
#include <utility>

#include "comm/grad_sync.h"
#include "core/error.h"
#include "core/sync_guard.h"
#include "core/trace.h"
#include "nn/chunked.h"
#include "nn/functional.h"
#include "parallel/tree_reducer.h"

namespace engine::parallel {

TrainStep::TrainStep(nn::Model& model, Synchronisation sync, NonfiniteMode nonfinite, Device dev,
                     int rank, int64_t first_step)
    : model_(model),
      sync_(std::move(sync)),
      guard_(nonfinite, sync_.optimizer->checked(), dev, rank, sync_.optimizer->verdict_comm()),
      forward_([&model](const Tensor& x) { return model(x); }),
      rank_(rank),
      steps_(first_step) {}

void TrainStep::replicate(nn::DataParallel& dp) {
  forward_ = [&dp](const Tensor& x) { return dp.forward(x); };
  after_backward_ = [&dp] { dp.reduce_gradients(); };
}

void TrainStep::broadcast_buffers(comm::Communicator& comm, nn::NamedTensors buffers) {
  buffer_comm_ = &comm;
  buffers_ = std::move(buffers);
}

void TrainStep::capture(std::unique_ptr<TrainStepGraph> graph) {
  graph_ = std::move(graph);
}

Tensor TrainStep::run(const data::DeviceBatch& b, const MicroBatch& m, bool* took) {
  *took = true;
  sync_guard::StepScope in_step;  // ENGINE_SYNC_GUARD=1: no host read until it ends
  Tensor loss;
  last_run_ = StepRun::Eager;
  if (!graph_) {
    loss = eager(b, m, took);
  } else {
    // Under a graph every step is a group's first and last (no accumulation) and skip is off:
    // a replayed step always steps; its host bookkeeping is the replay's.
    const auto on = [&](const data::DeviceBatch& x) { return eager(x, m, took); };
    loss = graph_->run(b, on, [&] {
      ++steps_;
      sync_.optimizer->count_replayed_step();
      guard_.replayed(steps_);
    });
    last_run_ = graph_->last();
  }
  guard_.queue_scan(loss);  // after a replay too: never inside the graph
  return loss;
}

// Under accumulation the group's first n-1 batches stop after backward (their gradients add up,
// no collective, as DDP's no_sync()); the last synchronises the sum and steps.
Tensor TrainStep::eager(const data::DeviceBatch& b, const MicroBatch& m, bool* took) {
  if (m.first) {
    sync_.optimizer->zero_grad();
    if (!buffers_.empty()) {
      trace::Scope ts("broadcast buffers", "comm");
      comm::broadcast_tensors(*buffer_comm_, buffers_, 0);
    }
  }
  ENGINE_CHECK(m.chunks.has_value() == (sync_.tree != nullptr),
               "training step: ", m.chunks ? "a chunk plan (world-invariant)" : "no chunk plan",
               " and the ", sync_.reducer->name(),
               " reducer: the tree reducer sums chunk partials, only it");
  std::optional<nn::ChunkedGradients> chunked;  // the world-invariant mode: per-chunk partials
  // It runs on the CPU only, where its host reads (the loss's scale, the packed nodes) are no
  // device syncs.
  std::optional<sync_guard::Allow> host_reads;
  if (m.chunks) {
    chunked.emplace(*m.chunks);
    chunked->set_tree_sum(sync_.tree->tree_sum());  // BatchNorm's statistics, over the ranks
    host_reads.emplace();
  }
  Tensor loss;
  {
    trace::Scope ts("forward", "forward");
    std::optional<nn::FlopCount> count;  // rank 0's first step counts the work per image
    if (rank_ == 0 && flop_per_image_ == 0 && b.images.size(0) > 0) count.emplace();
    Tensor scores = forward_(b.images);
    loss = model_.loss(scores, b.labels.to(scores.device()));
    if (count) flop_per_image_ = static_cast<double>(count->total()) / b.images.size(0);
  }
  if (m.last) sync_.reducer->begin(steps_);
  {
    trace::Scope ts("backward", "backward");
    loss.backward(guard_.seed(loss, m.scale));
  }
  after_backward_();
  if (chunked) {
    trace::Scope ts("chunk tree", "comm");
    loss = sync_.tree->collect(*chunked);  // the global batch's: equal on every rank
  }
  if (!m.last) return loss;
  sync_.reducer->finish();  // every gradient reduced (ZeRO-1: into this rank's shards)
  {
    trace::Scope ts("nonfinite check", "optimizer");
    *took = guard_.allow_step(steps_ + 1, loss);
  }
  if (!*took) return loss;  // skip: on every rank alike, parameters unchanged
  {
    trace::Scope ts("optimizer", "optimizer");
    sync_.optimizer->step();
  }
  ++steps_;
  return loss;
}

}  // namespace engine::parallel
