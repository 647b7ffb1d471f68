// comm/communicator.h: the Communicator - collectives and point-to-point messages among the W ranks
// of a job, on CPU buffers (raw pointers, or engine::Tensor on the CPU). Made by
// init_communicator() or connect_communicator() (comm/rendezvous/rendezvous.h), or
// make_mem_communicators() for ranks as threads.
//
// Sizes: `count` is elements of `dtype`; buffers hold count elements unless said otherwise.
// Collectives run in call order. Each carries a sequence number and a fingerprint (op, count,
// dtype, reduce op, root) that peers check: ranks that call different collectives or sizes get an
// engine::Error naming the ranks and both calls. Every wait is bounded by the timeout (default
// 300 s); an engine::TimeoutError names the rank(s) that stopped making progress and why - gone,
// frozen, unreachable, alive but not progressing (comm/health/blame.h) - or, when no rank can be
// blamed, the rank waited for. A dead peer is an engine::Error naming it. After any such error the
// communicator is broken: every later call throws.
//
// Async: the *_async calls and submit() queue work on a communication thread that this object owns;
// queued work and synchronous calls run in the order they were called. Work::wait() rethrows.
//
// A facade: it numbers the calls and makes their fingerprints, runs them in order (inline or on
// the communication thread), owns point-to-point, and hands each collective to an algorithm
// (comm/algorithms/algorithms.h: raw host buffers) or to the backend of the tensors' device
// (comm/backends/backend.h: host for CPU tensors; staged, ipc or nccl for CUDA tensors).
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/algorithms/algorithms.h"
#include "comm/algorithms/ring_schedule.h"
#include "comm/backends/backend.h"
#include "comm/base/deadline.h"
#include "comm/base/frame.h"
#include "comm/base/reduce.h"
#include "comm/base/store.h"
#include "comm/transport/transport.h"
#include "core/tensor.h"
#include "io/dtype.h"

namespace engine::comm {

// all_reduce in two levels when the ranks span hosts (comm/groups/two_level.cpp): reduce inside
// each host, all_reduce among one leader per host, broadcast inside each host. Auto: when there
// is more than one host, every host has more than one rank and CommOptions::algo is Auto (a named
// algorithm, Algo::Ring say, keeps it flat); On: whenever there is more than one host; Off: the
// flat algorithm always.
enum class TwoLevel { Auto, On, Off };
const char* two_level_name(TwoLevel t);
// "auto", "on" or "off"; engine::Error otherwise.
TwoLevel two_level_from_name(const std::string& s);

struct CommOptions {
  Millis timeout{300000};
  TwoLevel two_level = TwoLevel::Auto;
  // Pipelining grain of the ring and the chains: a chunk is cut into segments of this many bytes.
  size_t segment_bytes = 128 << 10;
  // The algorithm of all_reduce, broadcast and reduce (comm/algorithms/tuning.h); every rank the
  // same.
  Algo algo = Algo::Auto;
};

// A handle on queued or posted work.
class Work {
 public:
  Work() = default;
  // Blocks until the work is done; rethrows its error.
  void wait();
  bool completed() const;
  bool valid() const { return st_ != nullptr; }

 private:
  friend class Communicator;
  struct State;
  std::shared_ptr<State> st_;
};

class Communicator {
 public:
  Communicator(std::shared_ptr<Transport> transport, CommOptions opts,
               std::shared_ptr<Store> store = nullptr);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->world(); }
  // Collectives started so far (their sequence numbers; tests count calls with it).
  uint64_t collectives_started() const { return seq_; }
  // Its entries' `comm` in the flight recorder (comm/health/flight_recorder.h).
  uint32_t flight_id() const { return flight_; }
  const std::string& transport_kind() const { return transport_->kind(); }
  // Ranks on this host and this rank's index among them (from the host identities).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  void set_local(int local_rank, int local_size) {
    local_rank_ = local_rank;
    local_size_ = local_size;
  }
  // The host of every rank (0 .. hosts-1, numbered by first rank); sets local_rank/local_size
  // too. Until set, every rank counts as on one host. Between collectives only.
  void set_hosts(std::vector<int> host_of_rank);
  int num_hosts() const;
  TwoLevel two_level() const { return opts_.two_level; }
  void set_two_level(TwoLevel t) { opts_.two_level = t; }
  // Whether all_reduce of CPU buffers takes the two levels (the same answer on every rank).
  bool uses_two_level() const;

  // --- groups (comm/groups/split.cpp) --------------------------------------------------------
  // MPI_Comm_split / ncclCommSplit: every rank calls it (a collective of this communicator); the
  // ranks that pass the same color >= 0 get a communicator of their own, ranked by key, then by
  // rank here; color kNoColor (any negative) gets nullptr. The group runs over this
  // communicator's transport (comm/groups/group_transport.h) with its own sequence numbers and
  // a group id in every frame; every collective works in it. It must not outlive this one, and
  // two ranks call the collectives of the communicators they share in the same order.
  static constexpr int kNoColor = -1;
  std::unique_ptr<Communicator> split(int color, int key);
  // 0 for a job's communicator, else the group id its frames carry.
  uint16_t group() const { return group_; }

  Millis timeout() const { return opts_.timeout; }
  void set_timeout(Millis t) { opts_.timeout = t; }
  size_t segment_bytes() const { return opts_.segment_bytes; }
  void set_segment_bytes(size_t nbytes);
  Algo algo() const { return opts_.algo; }
  void set_algo(Algo a) { opts_.algo = a; }  // between collectives, the same on every rank
  // Sees every step of this rank's ring collectives (nullptr = none). Not owned.
  void set_ring_observer(RingObserver* obs) { observer_ = obs; }

  // --- collectives on raw buffers ---------------------------------------------------------------
  // In place on every rank, by the algorithm of CommOptions::algo (auto: by size; the ring,
  // recursive doubling, halving-doubling or trees: comm/algorithms/tuning.h).
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::Sum);
  // Root's buffer is copied to every rank.
  void broadcast(void* data, size_t count, DType dtype, int root);
  // Root's buffer receives the reduction; other ranks' buffers are left unchanged.
  void reduce(void* data, size_t count, DType dtype, ReduceOp op, int root);
  // out holds size() * count elements: rank r's `in` lands at out + r * count.
  void all_gather(const void* in, void* out, size_t count, DType dtype);
  // As all_gather, into root's out only (out may be null elsewhere).
  void gather(const void* in, void* out, size_t count, DType dtype, int root);
  // Root's in holds size() * count elements; rank r gets in + r * count (in may be null elsewhere).
  void scatter(const void* in, void* out, size_t count, DType dtype, int root);
  // in holds size() * count elements; out (count) gets the reduction of every rank's chunk r.
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype,
                      ReduceOp op = ReduceOp::Sum);
  void barrier();
  // in holds size() * count elements: rank r's chunk j (in + j * count) lands in rank j's chunk r
  // of out (size() * count elements). Direct exchange (comm/algorithms/all_to_all.h).
  void all_to_all(const void* in, void* out, size_t count, DType dtype);
  // PyTorch's all_to_all_single with split sizes: chunk j of `in` holds send_counts[j] elements
  // and goes to rank j; chunk j of `out` receives recv_counts[j] elements from rank j (chunks
  // back to back). Rank j's send_counts[r] must equal rank r's recv_counts[j].
  void all_to_all_single(const void* in, void* out, const std::vector<size_t>& send_counts,
                         const std::vector<size_t>& recv_counts, DType dtype);
  // The sum over the fixed tree of core/chunk_tree.h (comm/algorithms/chunk_tree.h): each rank
  // passes the nodes it holds of the tree of `leaves` leaves, each a buffer of count elements;
  // every rank gets the root in out (count elements; it may be one of the parts' buffers),
  // added in the tree's order: the same bits at every world size and whichever rank held which
  // node. The ranks' nodes together must cover every leaf once.
  void chunk_tree_all_reduce(size_t leaves, const std::vector<TreePartial>& parts, void* out,
                             size_t count, DType dtype);

  // --- point to point (their own stream: never mixed up with collectives) ----------------------
  // Messages from one rank to another arrive in order; tag and count must match the receiver's.
  void send(const void* data, size_t count, DType dtype, int dst, int tag = 0);
  void recv(void* data, size_t count, DType dtype, int src, int tag = 0);
  Work isend(const void* data, size_t count, DType dtype, int dst, int tag = 0);
  Work irecv(void* data, size_t count, DType dtype, int src, int tag = 0);

  // --- async collectives: run on the communication thread, in call order -----------------------
  Work all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::Sum);
  Work broadcast_async(void* data, size_t count, DType dtype, int root);
  Work reduce_async(void* data, size_t count, DType dtype, ReduceOp op, int root);
  // Any sequence of this communicator's calls as one queued unit (e.g. pack a bucket, all_reduce,
  // unpack). fn runs on the communication thread; its collectives run there inline.
  Work submit(std::function<void(Communicator&)> fn);

  // --- Tensor overloads: CPU tensors, and CUDA tensors (below) --------------------------------
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
  void broadcast(const Tensor& t, int root);
  void reduce(const Tensor& t, ReduceOp op, int root);
  void all_gather(const Tensor& in, const Tensor& out);        // out.numel() == size() * in.numel()
  void gather(const Tensor& in, const Tensor& out, int root);  // out undefined off root is fine
  void scatter(const Tensor& in, const Tensor& out, int root);  // in undefined off root is fine
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::Sum);
  // CPU tensors. Equal splits: in.numel() == out.numel(), a multiple of size(). With splits
  // (empty = equal): their sums are in.numel() and out.numel().
  void all_to_all(const Tensor& in, const Tensor& out);
  void all_to_all_single(const Tensor& in, const Tensor& out,
                         const std::vector<size_t>& send_counts,
                         const std::vector<size_t>& recv_counts);
  void send(const Tensor& t, int dst, int tag = 0);
  void recv(const Tensor& t, int src, int tag = 0);
  Work isend(const Tensor& t, int dst, int tag = 0);
  Work irecv(const Tensor& t, int src, int tag = 0);
  Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum);
  Work broadcast_async(const Tensor& t, int root);

  // --- CUDA tensors -----------------------------------------------------------------------------
  // The blocking Tensor overloads and the *_async ones take CUDA tensors (one device per call).
  // Three paths, the first that applies:
  //   nccl    attach_nccl(): every collective NCCL has (all_reduce, broadcast, reduce, all_gather,
  //           reduce_scatter, send, recv) runs on NCCL, on the device's comm stream;
  //   ipc     attach_ipc_ring(): float32 all_reduce runs on the CUDA IPC ring
  //           (comm/backends/cuda_ipc/cuda_ipc_ring.h), our own reduce-copy kernel between the
  //           GPUs of one host;
  //   staged  otherwise: the tensors are copied, on the comm stream after the compute work queued
  //           so far, into this communicator's pinned host buffer, the collective runs on the ring
  //           and transports above, and the results are copied back; compute waits for that copy.
  // Every path returns with the result in place (the host waited for it, bounded by the timeout),
  // and runs in call order with the other collectives. isend/irecv take CPU tensors only.
  // Both build their backend (comm/backends/backend.h) and hand it to set_backend for CUDA tensors.
  void attach_nccl(std::unique_ptr<NcclGroup> nccl);
  void attach_ipc_ring(std::unique_ptr<CudaIpcRing> ring);
  // The backend for tensors of one device kind (the defaults: host for CPU, staged for CUDA).
  // Between collectives only: not while work is queued.
  void set_backend(DeviceKind kind, std::unique_ptr<Backend> backend);
  // "nccl", "ipc" or "staged": how all_reduce moves a float32 CUDA tensor.
  std::string cuda_path() const { return cuda_->name(); }
  // "host" (the ring, chain and direct algorithms) or "mpi": how collectives move CPU tensors.
  std::string host_path() const { return host_->name(); }
  // all_reduce of a CUDA tensor that waits on the device only for `ready` (an event of the
  // tensor's device) instead of for all compute work queued before the call: gradient sync
  // starts a bucket once its own gradients are written, while backward goes on.
  void all_reduce_after(const Tensor& t, ReduceOp op, const cuda::Event& ready);
  // True when the CUDA backend can queue an all_reduce on the device and return at once (nccl).
  bool queues_all_reduce() const { return cuda_->queues_all_reduce(); }
  // That queued all_reduce: on the CUDA backend's stream after `ready` (an event of t's device),
  // returning at once with an event recorded after it, which the caller makes its compute stream
  // wait on (gradient sync: no thread, no host wait). Not numbered among the collectives nor run
  // on the communication thread: the backend orders it on its stream and bounds it (NCCL's
  // watchdog). Only where queues_all_reduce().
  cuda::Event all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready);
  // Throws the error of a queued all_reduce that failed, if any.
  void check_queued() const { cuda_->check_queued(); }
  // The rendezvous store (null for communicators made without one).
  std::shared_ptr<Store> store() const { return store_; }

  // The transport (tests, benchmarks).
  Transport& transport() { return *transport_; }

 private:
  // Stops the communication thread; queued work fails (the destructor's first step).
  void shutdown();
  // Execution: synchronous calls run inline unless queued work is ahead of them.
  void run(const std::function<void()>& fn);
  Work enqueue(std::function<void()> fn);
  void worker_loop();
  // Starts one collective on the executing thread: the next sequence number, the fingerprint
  // (count: elements per rank) and the context the algorithms and backends run with.
  CollContext call(CollOp op, size_t count, DType dtype, ReduceOp redop, int root);
  void check_root(int root, const char* what) const;
  // The backend for a call's tensors: the CUDA one when any of them is on a CUDA device.
  Backend& backend_for(const Tensor& a, const Tensor& b = Tensor()) const;
  Work post_p2p(bool is_send, void* data, size_t count, DType dt, int peer, int tag);
  // The host all_reduce on the executing thread: two levels (uses_two_level) or the backend's.
  void host_all_reduce(const CollContext& c, void* data);
  void two_level_all_reduce(void* data, size_t count, DType dtype, ReduceOp op);
  void check_all_to_all(const std::vector<size_t>& send_counts,
                        const std::vector<size_t>& recv_counts) const;

  std::unique_ptr<Backend> host_ = make_host_backend();
  std::unique_ptr<Backend> cuda_ = make_staged_backend();

  std::shared_ptr<Transport> transport_;
  CommOptions opts_;
  std::shared_ptr<Store> store_;  // keeps rank 0's store server alive
  RingObserver* observer_ = nullptr;
  int local_rank_ = 0, local_size_ = 1;
  std::vector<int> hosts_;  // host of each rank; empty = one host
  uint16_t group_ = 0;
  int splits_ = 0;  // split() calls so far (part of the children's group ids)
  // The two levels' groups, made by the first two-level all_reduce: this rank's host, and the
  // hosts' leaders (local rank 0; null elsewhere).
  std::unique_ptr<Communicator> host_comm_, leaders_comm_;
  bool two_level_ready_ = false;
  uint64_t seq_ = 0;     // collectives so far
  uint32_t flight_ = 0;  // its number in the flight recorder (comm/health/flight_recorder.h)
  std::mutex p2p_mu_;
  std::vector<uint64_t> p2p_sent_, p2p_recvd_;  // per peer message counters

  std::mutex qmu_;
  std::condition_variable qcv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Work::State>>> queue_;
  bool busy_ = false;  // a collective is executing (worker or inline)
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace engine::comm
