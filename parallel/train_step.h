// parallel/train_step.h: one training step on this rank's batch (docs/design.md, "One training
// step"), one path over one reducer and one optimizer, whichever the run chose:
//
//   group's first batch   optimizer.zero_grad; rank 0's buffers to every rank
//   every batch           forward -> loss -> [group's last: reducer.begin(step)] -> backward
//                         (seeded by the guard: 1/n of accumulation, NaN for a non-finite loss)
//                         -> the replicas' gradients into the module's (one process, several
//                         devices)
//   group's last batch    reducer.finish -> the guard's verdict -> optimizer.step
//
// With a captured step graph, full batches after the warm-up replay the graph instead.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "comm/communicator.h"
#include "data/upload.h"
#include "nn/data_parallel.h"
#include "nn/models.h"
#include "parallel/accumulate.h"
#include "parallel/nonfinite.h"
#include "parallel/reducers.h"
#include "parallel/step_graph.h"

namespace engine::parallel {

class TrainStep {
 public:
  // sync: the run's reducer and optimizer (make_synchronisation); first_step: the optimizer steps
  // a resumed run has taken; rank, dev: this rank's.
  TrainStep(nn::Model& model, Synchronisation sync, NonfiniteMode nonfinite, Device dev, int rank,
            int64_t first_step);

  // One process driving several devices: the forward through dp's replicas, whose gradients
  // join the module's after each backward.
  void replicate(nn::DataParallel& dp);
  // Before each group's first batch rank 0's buffers (BatchNorm statistics) go to every rank, as
  // DDP's broadcast_buffers=True; not called: the buffers stay each rank's.
  void broadcast_buffers(comm::Communicator& comm, nn::NamedTensors buffers);
  // The step captured as a CUDA graph after its warm-up (make_train_step_graph).
  void capture(std::unique_ptr<TrainStepGraph> graph);

  // One batch of an accumulation group; the group's last also synchronises and steps. Returns
  // the loss (on the device); *took: whether the optimizer stepped (skip may skip it). Inside the
  // host's no-read scope; queues the guard's scan after it.
  Tensor run(const data::DeviceBatch& b, const MicroBatch& m, bool* took);

  int64_t steps() const { return steps_; }  // optimizer steps taken, a resumed run's included
  // Bytes this rank sent to synchronise the step just taken (ring schedule).
  int64_t last_step_bytes() const { return sync_.reducer->bytes_per_step(steps_ - 1); }
  // The training work per image, counted in rank 0's first step (the figure rank 0 reports; one
  // count at a time in a process, nn::FlopCount); 0 on the other ranks.
  double flop_per_image() const { return flop_per_image_; }
  // How the last run() went: eager, captured or replayed.
  StepRun last_run() const { return last_run_; }
  NonfiniteGuard& guard() { return guard_; }
  StepOptimizer& optimizer() { return *sync_.optimizer; }
  comm::GradReducer& reducer() { return *sync_.reducer; }

 private:
  Tensor eager(const data::DeviceBatch& b, const MicroBatch& m, bool* took);

  nn::Model& model_;
  Synchronisation sync_;
  NonfiniteGuard guard_;
  std::function<Tensor(const Tensor&)> forward_;
  std::function<void()> after_backward_ = [] {};
  comm::Communicator* buffer_comm_ = nullptr;
  nn::NamedTensors buffers_;  // broadcast from rank 0 before every group; empty: none
  std::unique_ptr<TrainStepGraph> graph_;
  int rank_;
  int64_t steps_;
  double flop_per_image_ = 0;
  StepRun last_run_ = StepRun::Eager;
};

}  // namespace engine::parallel
