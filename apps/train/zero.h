// apps/train/zero.h: --zero 1, ZeRO stage 1 (DeepSpeed; PyTorch's ZeroRedundancyOptimizer): each
// rank keeps the optimizer state of its shard of the parameters only.
//
// The parameters are packed, in reverse order as --sync bucketed packs them, into flat buckets of
// at most --bucket-mb, each padded to a multiple of W elements and cut into W equal shards; rank r
// owns shard r of every bucket. One step, after backward:
//   per bucket  pack the gradients (count)  -> reduce_scatter (avg) -> this rank's shard (count/W)
//   optimizer   steps the shards: a parameter "zero<k>" per bucket k, (count/W) elements
//   per bucket  all_gather the updated shards (count) -> unpack into every parameter
// SGD and Adam are elementwise, so each element steps exactly as it would unsharded; the state
// shrinks by W (within a bucket's padding).
// Checkpoints stay one file of the unsharded optimizer's names and shapes: gather_state() brings
// every rank's shards to rank 0 (consolidate_state_dict), and the constructor takes such a state
// (from a run with or without --zero) and keeps its own shard.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace engine::apps {

class Zero1 {
 public:
  using MakeOptimizer = std::function<std::unique_ptr<nn::Optimizer>(nn::NamedTensors)>;
  // params: the model's, equal on every rank (after the broadcast from rank 0). full_state and
  // steps: an unsharded optimizer's state (empty for a fresh run).
  Zero1(comm::Communicator& comm, nn::NamedTensors params, size_t bucket_bytes,
        const MakeOptimizer& make, const nn::NamedTensors& full_state, int64_t steps);
  ~Zero1();
  Zero1(const Zero1&) = delete;
  Zero1& operator=(const Zero1&) = delete;

  // After backward (every parameter's grad, or none: zeros): the averaged step of every rank's
  // gradients; afterwards the parameters are equal on every rank. allow (optional) runs once the
  // shards' gradients are averaged (shards()' grads): false skips the step, parameters unchanged
  // (every rank must answer alike: --nonfinite's guard agrees through the communicator).
  void step(const std::function<bool()>& allow = nullptr);
  // This rank's shard of each bucket, named "zero<k> (--zero 1's bucket of <its parameters>)",
  // with its averaged gradient after step's reduce_scatter.
  nn::NamedTensors shards() const;
  // Every rank calls it: the unsharded optimizer's state at rank 0 (empty elsewhere).
  nn::NamedTensors gather_state();
  int64_t steps() const { return opt_->steps(); }
  // Bytes this rank sends per step (ring schedule): (W - 1) / W of each bucket, twice.
  int64_t bytes_per_step() const;
  // This rank's optimizer state, in bytes.
  size_t state_bytes() const;

 private:
  struct Bucket;
  void pack_params(Bucket& b) const;
  nn::NamedTensors shard_state(const nn::NamedTensors& full_state) const;

  comm::Communicator& comm_;
  nn::NamedTensors params_;
  std::vector<Bucket*> buckets_;
  std::unique_ptr<nn::Optimizer> opt_;  // over the shards, "zero<k>"
};

// The state's bytes (optimizer_state_bytes).
size_t state_nbytes(const nn::NamedTensors& state);

}  // namespace engine::apps
