// comm/backends/cuda_ipc/cuda_ipc_ring.h: a ring allreduce between the GPUs of one host through
// CUDA IPC, with our own fused reduce-copy kernel (comm/backends/cuda_ipc/ipc_ring.cu). No host
// staging: each rank's kernel reads what its previous rank wrote into its memory and writes into
// its next rank's memory.
//
// Memory. Each rank cudaMalloc's one region (IPC maps whole allocations, so not the caching
// allocator) and exports it with cudaIpcGetMemHandle; the handle travels through the Store under
// "<key>/<generation>/<rank>" with a header (host, pid, GPU, geometry) every peer checks. A rank
// opens the regions of next = (r+1)%W and prev = (r-1+W)%W (one mapping when W == 2):
//   rs[W * cap]    reduce-scatter staging, written by prev (element i of the buffer at rs[i])
//   ag[W * cap]    all-gather staging, written by prev
//   flags[2][W][S] per (phase, chunk, segment): the sequence number of the call whose data prev
//                  has finished writing there; written by prev
//   done[64]       per block of next's grid: the last call next's block has finished; written by
//                  next at the end of each call
// cap is the chunk capacity (elements) and S its segments. A call with a larger chunk makes a new
// generation: re-allocate (flags 0, done = the previous call), re-publish, re-open, free the old
// one. All ranks grow in the same call because they all call with the same count.
//
// Schedule (comm/algorithms/ring_schedule.h's RingSchedule, its chunks aligned to 4 elements so
// that every chunk and segment starts 16-byte aligned, cut into segments of segment_bytes; block b
// of the grid owns segments b, b+blocks, ... of every chunk and runs the 2W-1 units below in order,
// segment after segment; unit u < 2W-2 moves the chunk the schedule's step u sends):
//   unit 0            send       next.rs[r]   = local[r]
//   unit s, 1..W-2    reduce     next.rs[c]   = rs[c] op local[c]        c = r-s
//   unit W-1          final      local[c] = next.ag[c] = rs[c] op local[c] (/W for AVG), c = r+1
//   unit W-1+t, t<W-1 copy       local[c] = next.ag[c] = ag[c]           c = r+1-t
//   unit 2W-2         last copy  local[c] = ag[c]                        c = r+2
// (indices mod W): rank r ends the reduce-scatter owning chunk r+1, as in
// comm/algorithms/ring_schedule.h. Each chunk is reduced once, by its owner, so every rank ends
// with the same bits.
//
// Hand-off. A writer stores the segment, then __syncthreads, __threadfence_system and a volatile
// store of the call's sequence number (per object, from 1) into next's flag; the reader's thread 0
// spins on its own flag (volatile loads) until it is >= seq, then __threadfence_system and a
// barrier before the block reads. Flags only grow, so nothing is ever reset. Reuse across calls:
// before writing into next's staging in call seq, each block waits until every done counter in its
// own region (written by next's blocks) is >= seq-1, i.e. next has read everything of call seq-1
// (all of next's blocks: a new count moves segments between blocks). While each rank's calls run
// one after another this already follows from the ring's own causality (the schedule simulation
// in tests/comm/test_cuda_ipc_ring.cpp finds no overwrite without it); the counters make it
// explicit for a few loads per call.
//
// Bounded waits. Every spin reads %globaltimer and gives up after `timeout`, writing what it waited
// for (peer, phase, step, chunk, segment) into host-mapped pinned memory; the host polls an event
// recorded after the kernel, watches its own deadline, and raises an abort flag the kernel polls.
// Any failure marks the ring broken and throws engine::TimeoutError (or engine::Error) naming the
// rank waited for ("rank 1 (prev)"); every later call throws. Ordering with compute: the comm
// stream first waits for the compute stream's queued work (or for `ready`), the kernel runs on the
// comm stream, and the host waits for it: a call returns with the result in place.
//
// One process per rank (IPC cannot open a handle of its own process); several ranks may share a
// GPU, then their kernels are time-sliced (without MPS) and the ring advances about one unit per
// context switch (slow, but correct: the tests do it on one GPU). One call at a time per object. A
// build without CUDA has the class too; its constructor throws engine::Error.
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

class ProtoRing;
class EventChain;
using IpcProtocol = ipc::proto::Protocol;

// "blocking", "auto", "ll", "simple", "events" (--cuda-ring-protocol); parse: false for another
// name.
const char* ipc_protocol_name(IpcProtocol p);
bool parse_ipc_protocol(const std::string& s, IpcProtocol* out);

struct IpcRingOptions {
  Millis timeout{300000};          // each wait of each call (and the set-up's store waits)
  std::string key = "ipc_ring";    // store key prefix (one per ring)
  size_t segment_bytes = 1 << 20;  // pipelining grain (rounded down to 16 bytes, at least 16)
  int blocks = 8;                  // thread blocks of the kernel, at most half the SMs (and 64)
  // Blocking: the kernel above with the host's wait (the default until a GPU report shows the
  // others right). Auto, Ll, Simple: the stream-ordered protocols (comm/backends/cuda_ipc/
  // protocol/, docs/ring.md): queued on the comm stream, checked on the device, watched by a host
  // thread. Every rank must pass the same protocol and geometry.
  // Auto where the ranks share a GPU without MPS (mode "time-sliced") runs Blocking for every
  // size (protocol/layout.h's ring_protocol): the spinning kernels hold the GPU per time slice.
  // Events: the event-chained ring for ranks that share a GPU without MPS (chain/event_chain.h):
  // stream-ordered, no spinning kernel; what auto runs where the ranks are time-sliced.
  // Auto is the default since an H200 ran every protocol right (docs/gpu_bench).
  IpcProtocol protocol = IpcProtocol::Auto;
  // Simple's geometry, after NCCL's (8 slots of 512 KiB per channel, 16-32 channels on H100) and
  // the H200 sweep (two ranks under MPS, 256 MiB, in place: 8 x 128 KiB 87 GB/s, 8 x 512 KiB 129,
  // 16 x 512 KiB 245, 32 x 128 KiB 307, 32 x 512 KiB 364): 32 channels x 4 slots x 512 KiB = 64 MiB
  // of FIFO per rank's region (LL adds W x 256 KiB). Four slots: one held while the next waits, two
  // more so the sender runs ahead of a slow receiver. --cuda-ring-channels and
  // --cuda-ring-slot-bytes sweep them (0: these defaults).
  int channels = 32;              // Simple: blocks, each a ring over its part of the buffer
  int slots = 4;                  // Simple: FIFO depth per channel
  size_t slot_bytes = 512 << 10;  // Simple: bytes per slot (rounded down to 16, at least 16)
  // Auto: LL up to this size, Simple above. Measured on one H200, two ranks under MPS: LL 31.7 us
  // at 64 KiB and 46.6 us at 128 KiB, Simple 38.0 and 38.9 us: the crossover lies between.
  size_t ll_max_bytes = 64 << 10;
};

class CudaIpcRing : public DeviceGroup {
 public:
  // Collective over the W ranks of ONE host, rank r using GPU `device`: allocates and exchanges
  // the first (empty) region, so that a peer on another host, an unsupported GPU pair or
  // mismatched options fail here. Every rank must pass the same segment_bytes.
  CudaIpcRing(std::shared_ptr<Store> store, int rank, int world, int device,
              IpcRingOptions opts = {});
  // Waits briefly for next's last call to finish writing into this rank's region, then frees
  // everything; logs failures to stderr, never throws.
  ~CudaIpcRing();
  // rank(), size(), device(), broken(): DeviceGroup's.

  // In place, float32 on device(): SUM, AVG, MAX, MIN, PROD. The kernel waits on the device for
  // `ready` (an event of device(), alive until the call returns) when given, else for all compute
  // work queued so far. count 0 is a no-op. Every rank must call with the same count and op.
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::Sum,
                  const cuda::Event* ready = nullptr);
  // A CUDA tensor on device().
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum, const cuda::Event* ready = nullptr);

  // Why CUDA IPC cannot be used from `device` ("" when it can): no CUDA, no such device, no
  // unified addressing or mapped host memory, or no IPC export. P2P to the ring neighbours' GPUs
  // is the collective ipc_ring_problem()'s (comm/backends/cuda_ipc/ipc_peers.h), which callers use;
  // they fall back to host staging when non-empty.
  static std::string unsupported_reason(int device);

  // --- the stream-ordered protocols (opts.protocol != Blocking) ---
  bool stream_ordered() const { return proto_ != nullptr || chain_ != nullptr; }
  // Queues the all_reduce of t on the comm stream after `ready` and returns an event recorded
  // after it; the host does not wait. A failure shows at the next call or at check().
  cuda::Event all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready);
  // Throws the error of a queued call that failed, if any.
  void check() const;
  // "concurrent": the ranks' kernels can run together (one GPU per rank, or an MPS daemon);
  // "time-sliced": some ranks share a GPU without MPS. "" for the blocking ring chosen as such;
  // auto in a time-sliced ring runs the blocking ring and says "time-sliced".
  std::string mode() const;
  // What this ring runs: Blocking, Auto, Ll or Simple (auto when time-sliced: Blocking).
  IpcProtocol protocol() const { return ran_; }

 private:
  struct Impl;
  // Throws unless a call with these arguments may run (not broken, F32, data given).
  void check_call(const void* data, size_t count, DType dtype, ReduceOp op) const;

  IpcRingOptions opts_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<ProtoRing> proto_;   // the stream-ordered protocols, when chosen
  std::unique_ptr<EventChain> chain_;  // --cuda-ring-protocol events
  IpcProtocol ran_ = IpcProtocol::Blocking;
  std::string sliced_mode_;  // auto found "time-sliced" and runs the blocking ring
};

}  // namespace engine::comm
