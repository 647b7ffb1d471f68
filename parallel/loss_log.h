// parallel/loss_log.h: the epoch's per-step losses kept on the loss's device, read by the host
// only where they are shown: at a progress line, a checkpoint and the epoch's end. Recording a
// step's loss is a device-to-device copy of one float (no host wait), so a training step reads
// nothing back; the host sums what it reads in double, in step order, exactly as a per-step
// loss.item() would.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace engine::parallel {

class LossLog {
 public:
  // A new epoch: sum starts at `sum` (a resumed epoch's earlier part), nothing recorded.
  void start(double sum);
  // Inside the step: copies the one-element loss into the next slot of the device buffer. The
  // buffer is allocated on the first step (and grows by doubling, on the device, if ever full).
  void record(const Tensor& loss);
  // Outside the step: reads the losses recorded since the last read (one device -> host copy),
  // adds them to sum() in order and returns them.
  std::vector<double> read();
  double sum() const { return sum_; }
  // sum() and the unread losses, in order, leaving them unread (one device -> host copy).
  double total() const;
  double last() const { return last_; }
  // Recorded, not read yet.
  int64_t unread() const { return n_; }

 private:
  Tensor buf_;     // (capacity) F32 on the loss's device
  int64_t n_ = 0;  // slots recorded since the last read
  double sum_ = 0, last_ = 0;
};

// An epoch's loss figures over the ranks, for the epoch line and a mid-epoch checkpoint (comm
// null: one process). The mean training loss over every rank: their loss sums and batch counts
// summed in one float all_reduce; world_invariant: every rank's sum is already the global
// batches', equal everywhere, and nothing travels.
double epoch_mean_loss(comm::Communicator* comm, double loss_sum, int64_t batches,
                       bool world_invariant);
// Every rank's loss sum, bit for bit, at rank 0 (empty elsewhere): what a checkpoint keeps.
std::vector<double> gather_loss_sums(comm::Communicator* comm, double mine);
// A resumed epoch's loss sum so far for this rank, from a checkpoint's sums (one per rank of the
// writer); null when they hold none for it. World-invariant: every rank's is the first, whatever
// the writer's world size.
const double* resumed_loss_sum(const std::vector<double>& sums, bool world_invariant, int world,
                               int rank);

// After a membership change without the world-invariant mode (each rank summed its own epoch
// losses): the members' mean of what they kept (`kept`: this member's sum, none on a newcomer),
// one per rank of the new generation c. A collective of c.
std::vector<double> members_loss_sums(comm::Communicator& c, const std::vector<double>& kept);

}  // namespace engine::parallel
