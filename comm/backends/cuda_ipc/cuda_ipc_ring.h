// comm/backends/cuda_ipc/cuda_ipc_ring.h: a float32 ring allreduce between the GPUs of one host
// through CUDA IPC, with no host staging: each rank's kernels read and write the peers' memory.
// CudaIpcRing only chooses and owns what runs (queued_ring.h): it first learns who the peers are
// and whether their kernels can run together (connect_ipc_peers: one small header per rank, no GPU
// memory), then builds the one implementation that mode needs:
//   concurrent (one GPU per rank, or an MPS daemon): the stream-ordered protocols, LL for small
//     calls and Simple above (proto_ring.cu; docs/ring.md "The protocols");
//   time-sliced (ranks share a GPU without MPS): the event chain (chain/event_chain.cu), since a
//     kernel that spins on another context's writes holds the GPU for its whole time slice.
// Every call is queued on the comm stream and watched by a host thread; a failure shows at the
// next call or at check() as engine::TimeoutError or engine::Error naming the rank at fault, and
// breaks the ring. The figures behind these choices: docs/gpu_bench/.
//
// One process per rank (IPC cannot open a handle of its own process). One call at a time per
// object. A build without CUDA has the class too; its constructor throws engine::Error.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "comm/backends/cuda_ipc/protocol/layout.h"  // ipc::proto::Protocol
#include "comm/backends/device_group.h"
#include "comm/base/deadline.h"
#include "comm/base/reduce.h"
#include "comm/base/store.h"
#include "core/tensor.h"
#include "io/dtype.h"

namespace engine::cuda {
class Event;
}

namespace engine::comm {

class QueuedRing;
using IpcProtocol = ipc::proto::Protocol;

// "auto", "ll", "simple", "events"; parse: false for another name.
const char* ipc_protocol_name(IpcProtocol p);
bool parse_ipc_protocol(const std::string& s, IpcProtocol* out);

struct IpcRingOptions {
  Millis timeout{300000};        // each wait of each call (and the set-up's store waits)
  std::string key = "ipc_ring";  // store key prefix (one per ring)
  // Auto: by mode and size, as above. Ll, Simple, Events: that one whatever the mode. Every rank
  // must pass the same protocol and geometry.
  IpcProtocol protocol = IpcProtocol::Auto;
  // Simple's geometry, after NCCL's (slots of 512 KiB, many channels): channels x slots x
  // slot_bytes of FIFO per rank's region (64 MiB by default; LL adds W x 256 KiB). Four slots: one
  // held while the next waits, two more so the sender runs ahead of a slow receiver.
  int channels = 32;               // Simple: blocks, each a ring over its part of the buffer
  int slots = 4;                   // Simple: FIFO depth per channel
  size_t slot_bytes = 512 << 10;   // Simple: bytes per slot (rounded down to 16, at least 16)
  size_t ll_max_bytes = 64 << 10;  // Auto, concurrent: LL up to this size, Simple above
};

class CudaIpcRing : public DeviceGroup {
 public:
  // Collective over the W ranks of ONE host, rank r using GPU `device`: checks the peers, learns
  // the mode and sets up what it runs, so that a peer on another host, an unsupported GPU pair or
  // mismatched options fail here.
  CudaIpcRing(std::shared_ptr<Store> store, int rank, int world, int device,
              IpcRingOptions opts = {});
  // Waits (bounded) for the queued calls, then frees everything; logs failures to stderr, never
  // throws.
  ~CudaIpcRing();
  // rank(), size(), device(), broken(): DeviceGroup's.

  // In place, float32 on device(): SUM, AVG, MAX, MIN, PROD, queued after `ready` (an event of
  // device()) when given, else after all compute work queued so far; the compute stream then
  // waits for it on the device. count 0 is a no-op. Every rank must call with the same count and
  // op.
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::Sum,
                  const cuda::Event* ready = nullptr);
  // A CUDA tensor on device().
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum, const cuda::Event* ready = nullptr);

  // Why CUDA IPC cannot be used from `device` ("" when it can): no CUDA, no such device, no
  // unified addressing or mapped host memory, or no IPC export. P2P to the ring neighbours' GPUs
  // is the collective ipc_ring_problem()'s (comm/backends/cuda_ipc/ipc_peers.h), which callers use;
  // they fall back to host staging when non-empty.
  static std::string unsupported_reason(int device);

  // False only for one rank, where nothing moves.
  bool stream_ordered() const { return ring_ != nullptr; }
  // Queues the all_reduce of t on the comm stream after `ready` and returns an event recorded
  // after it; the compute stream does not wait. A failure shows at the next call or at check().
  cuda::Event all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready);
  // Throws the error of a queued call that failed, if any.
  void check() const;
  // "concurrent": the ranks' kernels can run together (one GPU per rank, or an MPS daemon);
  // "time-sliced": some ranks share a GPU without MPS; "" for one rank.
  std::string mode() const { return mode_; }
  // What this ring runs: Ll, Simple or Events as asked, Auto (LL or Simple by size) or, for
  // Auto when time-sliced, Events.
  IpcProtocol protocol() const { return ran_; }

 private:
  // Throws unless a call with these arguments may run (not broken, F32, data given).
  void check_call(const void* data, size_t count, DType dtype, ReduceOp op) const;

  IpcRingOptions opts_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<QueuedRing> ring_;  // null for one rank
  IpcProtocol ran_ = IpcProtocol::Auto;
  std::string mode_;
};

}  // namespace engine::comm
