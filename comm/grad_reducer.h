// comm/grad_reducer.h: one interface for every way gradients meet across ranks, as DDP's
// communication hook: the training step (parallel/) drives it without knowing which one runs.
//
//   reducer.begin(step)   before backward: arms the gradient hooks; work may start (per bucket,
//                         compressed or not) while backward is still running
//   loss.backward()
//   reducer.finish()      after backward: every parameter's grad is the mean over ranks (or,
//                         for PowerSGD, its approximation)
//
// Implementations (comm/grad_sync.h, comm/half_grad_sync.h, comm/powersgd.h) see tensors and
// hooks only, never a model.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace engine::comm {

using NamedParams = std::vector<std::pair<std::string, Tensor>>;

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Before the backward of optimizer step `step` (0-based) whose gradients are synchronised.
  virtual void begin(int64_t step) = 0;
  // After that backward: each parameter's grad is reduced across ranks. A parameter without a
  // gradient on this step counts as zeros (every rank must agree on which).
  virtual void finish() = 0;
  // Bytes this rank sends (ring schedule) to synchronise step `step`.
  virtual int64_t bytes_per_step(int64_t step) const = 0;
  // The reducer's state for a checkpoint: every rank calls it, rank 0 gets it all (empty
  // elsewhere; empty for stateless reducers).
  virtual NamedParams gather_state() { return {}; }
  // Restores this rank's part of gather_state()'s; throws engine::Error on one that does not fit.
  virtual void load_state(const NamedParams& state) { (void)state; }
  // What runs, for the lines rank 0 prints ("bucketed", "bf16", "powersgd:4").
  virtual std::string name() const = 0;
};

}  // namespace engine::comm
