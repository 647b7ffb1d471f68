// comm/backends/cuda_ipc/proto_ring.h: the stream-ordered CUDA IPC ring (--cuda-ring-protocol
// auto|ll|simple; docs/ring.md): one region per rank (protocol/layout.h) allocated and exchanged
// once at connect, every rank mapping every peer's; each all_reduce is one kernel (LL or Simple,
// protocol/kernels.cuh) queued on the comm stream after the tensor is ready, with no host barrier,
// no pointer query, no event creation and no host wait per call. The kernel checks the call words
// and bounds every wait; a failure lands in a host-mapped error record that a watchdog thread
// (comm/health/watchdog.h) reads, with a pooled event per call, naming the rank at fault within
// the timeout. Host code only: CudaIpcRing (cuda_ipc_ring.h) owns one when a protocol is chosen.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"

namespace engine::comm {

class ProtoRing {
 public:
  // Collective over the ranks of one host: allocates, publishes and opens the regions through
  // the store (keys "<opts.key>/proto/<rank>"); throws engine::Error naming a peer that does not
  // fit (another host, another geometry or protocol) and TimeoutError naming one that never
  // publishes.
  ProtoRing(Store& store, int rank, int world, int device, const IpcRingOptions& opts);
  // Waits (bounded) for the queued calls, then frees; a kernel that does not stop is left alone.
  ~ProtoRing();
  ProtoRing(const ProtoRing&) = delete;
  ProtoRing& operator=(const ProtoRing&) = delete;

  // Queues an all_reduce of `count` floats at `data` (memory of this rank's GPU) on the comm
  // stream after `ready` (null: after the compute stream's queued work). Throws a failure of an
  // earlier queued call first.
  void enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready);
  // The compute stream waits, on the device, for the last queued call.
  void compute_waits_last();
  // Throws the recorded failure of a queued call, if any.
  void check() const;
  // "concurrent" or "time-sliced" (CudaIpcRing::mode).
  const std::string& mode() const;
  // What a call of `count` floats runs (Ll or Simple).
  IpcProtocol protocol_for(int64_t count) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace engine::comm
