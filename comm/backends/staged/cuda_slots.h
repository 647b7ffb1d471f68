// comm/backends/staged/cuda_slots.h: PipelineOps on a GPU (cuda_slots.cu): N pinned host slots
// made once, downloads on the device's comm stream, uploads on a stream of their own, one event
// per slot and direction reused call after call; the host waits only for each segment's download
// (polling its event, bounded by the call's timeout), the compute stream for the last upload.
#pragma once
#include <memory>

#include "comm/backends/staged/pipeline.h"
#include "core/cuda_backend.h"

namespace engine::comm::staged {

class DeviceSlots : public PipelineOps {
 public:
  // Starts a call on `data` (device memory of device()): the comm stream waits for `ready` (or
  // for all compute work queued so far), and host_reduce runs c's collective per segment.
  virtual void begin(const CollContext& c, void* data, const cuda::Event* ready) = 0;
  virtual int device() const = 0;
  virtual size_t slot_bytes() const = 0;
  virtual int slots() const = 0;
};

// `slots` pinned slots of `slot_bytes` each, for tensors of `device`. Throws engine::Error in a
// build without CUDA (cuda_slots_absent.cpp).
std::unique_ptr<DeviceSlots> make_cuda_slots(int device, int slots, size_t slot_bytes);

}  // namespace engine::comm::staged
