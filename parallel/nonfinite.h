// parallel/nonfinite.h: the non-finite guard (stop, skip or off): inf and NaN in the loss, the
// gradients and the weights. A non-finite loss on any rank is carried into the gradients (the
// backward's seed is NaN instead of 1), so checking the synchronised gradients, equal on every
// rank, gives every rank the same answer without another collective.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace engine::parallel {

// Stop: the first non-finite gradient ends the run (every rank alike); skip: such a step is
// skipped on every rank and counted; off: nothing is checked, every step is taken.
enum class NonfiniteMode { Stop, Skip, Off };

// What Stop throws: the step and the parameter, as `what()` says ("step 12: the gradient of
// conv1.weight is not finite (loss nan on rank 1); stopped, no checkpoint written from it").
class NonfiniteStop : public Error {
 public:
  explicit NonfiniteStop(std::string found);
  // "step 12: the gradient of conv1.weight is not finite (loss nan on rank 1)"
  const std::string& found() const { return found_; }

 private:
  std::string found_;
};

class NonfiniteGuard {
 public:
  // params: the optimizer's, on dev. agree: when the ranks' params differ (ZeRO-1's shards), the
  // communicator through which every rank learns the first flagged one (one all_reduce per step);
  // null when params' gradients are synchronised.
  NonfiniteGuard(NonfiniteMode mode, nn::NamedTensors params, Device dev, int rank,
                 comm::Communicator* agree = nullptr);

  // The seed gradient of loss.backward() for a loss scaled by `scale` (accumulation's 1/n):
  // scale for a finite loss, NaN otherwise, so that every gradient is NaN (on loss's device, no
  // host wait). Off: undefined for scale 1 (backward's own seed), else scale.
  Tensor seed(const Tensor& loss, float scale);
  // Call once the gradients are synchronised, before the optimizer step: whether to take the
  // step. skip (and stop under agree): reads the scan now (a host read inside the step, allowed
  // by the sync guard), false on every rank alike. stop: the scan's flags are queued into a row of
  // their own by queue_scan, after the step, and the step goes on; check_pending reads the rows
  // where the host reads the loss anyway (progress line, checkpoint, epoch end), so the step itself
  // reads nothing back.
  bool allow_step(int64_t step, const Tensor& loss);
  // A replayed CUDA graph took step `step`: its scan ran in the graph, into the flags allow_step
  // scans into (stop); queue_scan queues it as it queues allow_step's.
  void replayed(int64_t step);
  // After the step returns (or a replay is queued), outside any graph: stop queues the scan of
  // the step allow_step or replayed named: the flags copied into a row of their own and the loss
  // copied, both on the device, for check_pending. Nothing when no scan waits.
  void queue_scan(const Tensor& loss);
  // Reads the queued scans (outside the step): throws engine::Error naming the first step and
  // the first parameter of it whose gradient was not finite, and that step's loss.
  void check_pending();
  int64_t skipped() const { return skipped_; }
  NonfiniteMode mode() const { return mode_; }

 private:
  // Flags into row (P, on dev_): 1 for each parameter whose gradient holds inf or NaN.
  void scan(Tensor row);
  // The first parameter flagged in f (P); params_.size() when none.
  int64_t first_in(const std::vector<float>& f) const;
  [[noreturn]] void stop(int64_t step, const std::string& name, double loss) const;

  NonfiniteMode mode_;
  nn::NamedTensors params_;
  comm::Communicator* agree_;
  Device dev_;
  int rank_;
  Tensor flags_, seed_;  // (P) one per parameter; (1)
  Tensor rows_;          // stop: (capacity, P), a queued scan per step since the last read
  std::vector<int64_t> pending_steps_;  // the step of each queued row
  std::vector<Tensor> pending_losses_;  // its loss (detached, on the device)
  int64_t skipped_ = 0;
  int64_t scanned_step_ = -1;  // stop: the step whose scan is in flags_, not queued yet
};

// The name of the first floating-point tensor of ts holding inf or NaN; "" when none.
std::string first_nonfinite(const nn::NamedTensors& ts);

}  // namespace engine::parallel
