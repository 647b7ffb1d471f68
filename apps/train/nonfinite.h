// apps/train/nonfinite.h: --nonfinite stop|skip|off: inf and NaN in the loss, the gradients and
// the weights. A non-finite loss on any rank is carried into the gradients (the backward's seed is
// NaN instead of 1), so checking the synchronised gradients, equal on every rank, gives every rank
// the same answer without another collective.
#pragma once
#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace engine::apps {

class NonfiniteGuard {
 public:
  // mode: "stop" or "skip" ("off" builds no guard). params: the optimizer's, on dev. agree: when
  // the ranks' params differ (--zero 1's shards), the communicator through which every rank learns
  // the first flagged one (one all_reduce per step); null when params' gradients are synchronised.
  NonfiniteGuard(std::string mode, nn::NamedTensors params, Device dev, int rank,
                 comm::Communicator* agree = nullptr);

  // The seed gradient of loss.backward(): 1 for a finite loss, NaN otherwise (on loss's device,
  // no host wait).
  Tensor seed(const Tensor& loss);
  // Call once the gradients are synchronised, before the optimizer step: whether to take the
  // step. Throws engine::Error (stop) naming the step and the first parameter whose gradient is
  // not finite; false (skip) on every rank alike. On a GPU with stop, the scan is queued and read
  // by check_pending, when the host reads the loss anyway.
  bool allow_step(int64_t step, const Tensor& loss);
  // The GPU's deferred answer for the step allow_step let through: throws as allow_step does.
  void check_pending(double loss);
  // A replayed CUDA graph took step `step`: its scan ran in the graph, like allow_step's; its
  // answer is read by check_pending as allow_step's deferred one.
  void replayed(int64_t step);
  int64_t skipped() const { return skipped_; }

 private:
  void scan();
  // The first parameter whose gradient the last scan flagged; "" when none.
  std::string first_flagged();
  [[noreturn]] void stop(int64_t step, const std::string& name, double loss) const;

  std::string mode_;
  nn::NamedTensors params_;
  comm::Communicator* agree_;
  Device dev_;
  int rank_;
  Tensor flags_, seed_;  // (P) one per parameter; (1)
  int64_t pending_step_ = -1, skipped_ = 0;
};

// The name of the first floating-point tensor of ts holding inf or NaN; "" when none.
std::string first_nonfinite(const nn::NamedTensors& ts);

}  // namespace engine::apps
