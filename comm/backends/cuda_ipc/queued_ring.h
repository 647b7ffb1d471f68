// comm/backends/cuda_ipc/queued_ring.h: the one interface of what CudaIpcRing runs (docs/ring.md):
// the stream-ordered protocols, LL and Simple (proto_ring.cu: kernels that spin on the peers'
// writes, for ranks whose kernels run together), and the event chain (chain/event_chain.cu:
// plain kernels ordered by CUDA IPC events, for ranks that share a GPU without MPS). Each call is
// queued on the comm stream and watched by a host thread; the host never waits for it. Host code;
// the makers exist only in a build with CUDA (cuda_ipc_ring.h's CudaIpcRing calls them).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"

namespace engine::comm {

class QueuedRing {
 public:
  virtual ~QueuedRing() = default;
  // Queues an all_reduce of `count` floats at `data` (memory of this rank's GPU) on the comm
  // stream after `ready` (null: after the compute stream's queued work). Throws a failure of an
  // earlier queued call first.
  virtual void enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready) = 0;
  // The compute stream waits, on the device, for the last queued call.
  virtual void compute_waits_last() = 0;
  // Throws the failure of a queued call, if any.
  virtual void check() const = 0;
  // What a call of `count` floats runs (Ll, Simple or Events).
  virtual IpcProtocol protocol_for(int64_t count) const = 0;
};

// The ranks' mode, from a header every rank publishes under "<opts.key>/peer/<rank>" (host, boot,
// process, GPU, MPS): "time-sliced" when a peer shares this rank's GPU and some rank sees no MPS
// daemon, else "concurrent". Collective; allocates nothing on the GPU. Throws engine::Error naming
// a peer on another host or in this process, TimeoutError naming one that never publishes.
std::string connect_ipc_peers(Store& store, int rank, int world, int device,
                              const IpcRingOptions& opts);

// Collective over the ranks that connect_ipc_peers accepted. LL and Simple (opts.protocol Auto,
// Ll or Simple): one region per rank of the options' geometry, allocated and mapped by every peer
// now (keys "<opts.key>/proto/<rank>").
std::unique_ptr<QueuedRing> make_proto_ring(Store& store, int rank, int world, int device,
                                            const IpcRingOptions& opts);
// The event chain: IPC events and shared counters now (keys "<opts.key>/chain/..."), the buffer
// at the first call.
std::unique_ptr<QueuedRing> make_event_chain(Store& store, int rank, int world, int device,
                                             const IpcRingOptions& opts);

}  // namespace engine::comm
