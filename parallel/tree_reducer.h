// parallel/tree_reducer.h: the world-invariant mode's reducer (issue 35, docs/training.md "The
// same bits at any world size"). Under nn::ChunkedGradients each rank's ops leave, per
// parameter and for the loss, the tree nodes of its chunks of the global batch; collect() packs
// each node's partials of every parameter and the loss into one buffer and sums them over the
// fixed chunk tree (Communicator::chunk_tree_all_reduce; one process folds them itself), so the
// gradient of every global batch has the same bits at every world size. One collective per
// micro-batch: under accumulation each micro-batch's root is added into .grad in batch order.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "core/tensor.h"
#include "nn/chunked.h"
#include "nn/module.h"

namespace engine::parallel {

class TreeReducer final : public comm::GradReducer {
 public:
  // comm: the ranks, or null for one process. params: the model's, equal on every rank.
  TreeReducer(comm::Communicator* comm, nn::NamedTensors params);

  // After a micro-batch's backward, inside the scope it ran in: every parameter's sum over the
  // global batch added into its .grad (set when the group cleared it), the ranks' nodes taken
  // from cg. Returns the global batch's mean loss (its tree-summed loss over its size), a CPU
  // scalar equal on every rank.
  Tensor collect(nn::ChunkedGradients& cg);
  // What sums a step's per-chunk doubles (BatchNorm's statistics) over the ranks in the same
  // tree (ChunkedGradients::set_tree_sum); empty for one process (it folds them itself).
  nn::TreeSum tree_sum();
  // What finish() does once the group's sums are in .grad (ZeRO-1: cut this rank's shards), and
  // the bytes the optimizer's step then sends (its all_gather), counted in bytes_per_step.
  void then(std::function<void()> after, int64_t after_bytes);

  void begin(int64_t step) override { (void)step; }
  void finish() override;
  // The bytes this rank sent for the last group's collects and tree sums (the chunk tree's
  // schedule), and its step's all_gather under ZeRO-1.
  int64_t bytes_per_step(int64_t step) const override;
  std::string name() const override { return "tree"; }

 private:
  comm::Communicator* comm_;
  nn::NamedTensors params_;
  size_t count_ = 1;  // floats per node: every parameter's, then the loss
  int64_t group_bytes_ = 0, last_bytes_ = 0;
  std::function<void()> after_;
  int64_t after_bytes_ = 0;
};

// The bytes a rank holding `nodes` tree nodes sends in one chunk_tree_all_reduce of `count`
// floats among `world` ranks: its partials cut to every other owner's slice, then its own
// folded slice to every other rank (the bitmaps aside).
int64_t tree_bytes(size_t count, int world, int rank, size_t nodes);

}  // namespace engine::parallel
