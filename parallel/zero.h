// parallel/zero.h: ZeRO stage 1 (DeepSpeed; PyTorch's ZeroRedundancyOptimizer), an optimizer
// wrapper: each rank keeps the optimizer state of its shard of the parameters only.
//
// The parameters are packed, in reverse order as bucketed averaging packs them, into flat buckets
// of at most bucket_bytes, each padded to a multiple of W elements and cut into W equal shards;
// rank r owns shard r of every bucket. One step, after backward:
//   per bucket  pack the gradients (count)  -> reduce_scatter (avg) -> this rank's shard (count/W)
//   optimizer   steps the shards: a parameter "zero<k>" per bucket k, (count/W) elements
//   per bucket  all_gather the updated shards (count) -> unpack into every parameter
// SGD and Adam are elementwise, so each element steps exactly as it would unsharded; the state
// shrinks by W (within a bucket's padding).
// Checkpoints stay one file of the unsharded optimizer's names and shapes: gather_state() brings
// every rank's shards to rank 0 (consolidate_state_dict), and the constructor takes such a state
// (from a run with or without ZeRO-1) and keeps its own shard.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "parallel/reducers.h"

namespace engine::parallel {

class Zero1 : public StepOptimizer {
 public:
  // params: the model's, equal on every rank (after the broadcast from rank 0). full_state and
  // steps: an unsharded optimizer's state (empty for a fresh run).
  Zero1(comm::Communicator& comm, nn::NamedTensors params, size_t bucket_bytes,
        const OptimizerOptions& o, const nn::NamedTensors& full_state, int64_t steps);
  ~Zero1() override;
  Zero1(const Zero1&) = delete;
  Zero1& operator=(const Zero1&) = delete;

  // The reducer side: finish() reduce_scatters every rank's gradients (every parameter's grad,
  // or none: zeros) into this rank's shards, averaged.
  std::unique_ptr<comm::GradReducer> make_reducer();
  void reduce_scatter();
  // Where the gradients are already summed on every rank (the world-invariant mode's tree):
  // this rank's shards cut from them, no collective. all_gather_bytes: what step() then sends.
  void take_shards();
  int64_t all_gather_bytes() const;
  // The optimizer side: steps the shards and all_gathers them into every parameter; afterwards
  // the parameters are equal on every rank. A step the verdict refused is simply not called
  // (every rank answers alike: the guard agrees through verdict_comm()).
  void step() override;
  void zero_grad() override { full_->zero_grad(); }
  void count_replayed_step() override { opt_->count_replayed_step(); }
  int64_t steps() const override { return opt_->steps(); }
  // This rank's shard of each bucket, named "zero<k> (ZeRO-1's bucket of <its parameters>)",
  // with its averaged gradient after reduce_scatter.
  nn::NamedTensors checked() const override;
  comm::Communicator* verdict_comm() const override { return &comm_; }
  size_t state_bytes() const override;
  // Every rank calls it: the unsharded optimizer's state at rank 0 (empty elsewhere).
  nn::NamedTensors gather_state();
  const nn::Optimizer& gathered() override;
  // Bytes this rank sends per step (ring schedule): (W - 1) / W of each bucket, twice.
  int64_t bytes_per_step() const;

 private:
  struct Bucket;
  void pack_params(Bucket& b) const;
  void pack_grads(Bucket& b) const;
  nn::NamedTensors shard_state(const nn::NamedTensors& full_state) const;

  comm::Communicator& comm_;
  nn::NamedTensors params_;
  OptimizerOptions options_;
  std::vector<std::unique_ptr<Bucket>> buckets_;  // freed also when the constructor throws
  std::unique_ptr<nn::Optimizer> opt_;            // over the shards, "zero<k>"
  std::unique_ptr<nn::Optimizer> full_;  // over params_, without state: zero_grad, gathered()
};

}  // namespace engine::parallel
