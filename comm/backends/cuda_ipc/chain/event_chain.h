// comm/backends/cuda_ipc/chain/event_chain.h: the event-chained CUDA IPC ring
// (--cuda-ring-protocol events; docs/ring.md "Time-sliced ranks"): for ranks that share a GPU
// without MPS, where a kernel that spins on another context's writes holds the GPU for its whole
// time slice. Each all_reduce is 2W-1 steps (plan.h), each one plain kernel on the comm stream that
// first waits, on the device, for both ring neighbours' previous step through their CUDA IPC
// events (run.h; the host only waits for the neighbours to have enqueued it, through counters in a
// POSIX shm segment). Nothing spins on the GPU. Host code only: CudaIpcRing (cuda_ipc_ring.h)
// owns one when opts.protocol == Events.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"

namespace engine::comm {

class EventChain {
 public:
  // Collective over the ranks of one host: makes and exchanges (store keys "<opts.key>/chain/...")
  // the IPC events and the shared counters, opens both neighbours' events. The buffer is made at
  // the first call (and re-made, collectively, when a larger count comes). Throws engine::Error
  // naming a peer on another host or in this process, TimeoutError naming one that never comes.
  EventChain(Store& store, int rank, int world, int device, const IpcRingOptions& opts);
  // Waits (bounded) for the queued steps and for right's reads of this rank's buffer, then frees.
  ~EventChain();
  EventChain(const EventChain&) = delete;
  EventChain& operator=(const EventChain&) = delete;

  // Enqueues an all_reduce of `count` floats at `data` (memory of this rank's GPU) on the comm
  // stream after `ready` (null: after the compute stream's queued work). Host waits are bounded by
  // opts.timeout and name the neighbour. Throws a failure of an earlier call first.
  void enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready);
  // The compute stream waits, on the device, for the last queued call.
  void compute_waits_last();
  // Throws the failure of a queued call (its GPU work did not finish in time), if any.
  void check() const;
  // "concurrent" or "time-sliced" (CudaIpcRing::mode), as proto_ring.h decides it.
  const std::string& mode() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace engine::comm
