// parallel/accumulate.h: gradient accumulation over K batches (DDP's no_sync(), Horovod's
// backward_passes_per_step): the batches of an epoch in groups of K, one optimizer step per group.
//
//   epoch batches   0 1 2 3 | 4 5 6 7 | 8 9        (K = 4, 10 batches)
//   group           0       | 1       | 2 (short)
//   sync + step          ^3        ^7    ^9
//
// Each batch's loss is scaled by 1/n (n: the batches of its group) so the summed gradient is the
// mean over the group, as one batch n times as large. Only the group's last backward
// synchronises gradients; the others run no collective. The epoch's last group may be short
// (n < K): it is stepped, its losses scaled by 1/n (its own mean), never dropped.
// Groups are counted from the epoch's first batch, so a checkpoint (written after optimizer
// steps) always falls on a group boundary.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>

#include "nn/chunked.h"

namespace engine::parallel {

// What one batch is within its group.
struct MicroBatch {
  bool first = true;   // the group's first batch: clear gradients, sync buffers
  bool last = true;    // the group's last batch: synchronise gradients, optimizer step
  float scale = 1.0f;  // the loss's factor, 1 / (batches in the group)
  // The world-invariant mode: this rank's chunks of the micro-batch's global batch (the step runs
  // under nn::ChunkedGradients and sums through the run's TreeReducer); empty otherwise.
  std::optional<nn::ChunkPlan> chunks;
};

// Batch `i` of an epoch of `total` batches, in groups of k.
inline MicroBatch micro_batch(int64_t i, int64_t total, int64_t k) {
  const int64_t group_begin = i / k * k, group_end = std::min(total, group_begin + k);
  MicroBatch m;
  m.first = i == group_begin;
  m.last = i + 1 == group_end;
  m.scale = 1.0f / static_cast<float>(group_end - group_begin);
  return m;
}

}  // namespace engine::parallel
