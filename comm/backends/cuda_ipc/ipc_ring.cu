// comm/backends/cuda_ipc/ipc_ring.cu: CudaIpcRing with CUDA (see
// comm/backends/cuda_ipc/cuda_ipc_ring.h): the regions and their generations, the exchange of IPC
// handles through the store, the launch of the reduce-copy kernel (ipc_ring_kernel.cuh) and the
// host's bounded wait for it.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "comm/backends/cuda_ipc/chain/event_chain.h"
#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/backends/cuda_ipc/ipc_ring_kernel.cuh"
#include "comm/backends/cuda_ipc/proto_ring.h"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::comm {
namespace {

using ipc::Control;
using ipc::kMaxBlocks;
using ipc::WaitRecord;

constexpr uint32_t kMagic = 0x52435049;  // "IPCR"
constexpr uint32_t kVersion = 1;
constexpr size_t kAlign = 256;
// The host gives the kernel's own per-wait timeout this long to fire first, then aborts it, then
// gives up on it after kStopWait.
constexpr Millis kHostGrace(1000);
constexpr Millis kStopWait(10000);
// The destructor waits at most this long for next's last done counters.
constexpr Millis kDrainWait(5000);

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t q) {
  return ceil_div(a, q) * q;
}

// What a rank publishes for each generation under "<key>/<generation>/<rank>".
struct PeerInfo {
  uint32_t magic;
  uint32_t version;
  int32_t world, rank, device, blocks;
  int64_t pid;
  int64_t seg_elems, cap_chunk, nseg_cap;
  uint64_t generation;
  uint64_t nbytes;
  char host[64];      // gethostname()
  char boot_id[40];   // /proc/sys/kernel/random/boot_id: one per boot of one machine
  char gpu_uuid[16];  // cudaDeviceProp::uuid
  cudaIpcMemHandle_t handle;
};
static_assert(std::is_trivially_copyable_v<PeerInfo>);

// Byte offsets of the parts of a region.
struct Layout {
  size_t rs = 0, ag = 0, flags = 0, done = 0, nbytes = 0;
};

Layout layout_of(int world, int64_t cap_chunk, int64_t nseg_cap) {
  auto align = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  Layout l;
  const size_t staging = align(sizeof(float) * world * static_cast<size_t>(cap_chunk));
  l.rs = 0;
  l.ag = staging;
  l.flags = 2 * staging;
  l.done = l.flags + align(sizeof(uint64_t) * 2 * world * static_cast<size_t>(nseg_cap));
  l.nbytes = l.done + sizeof(uint64_t) * kMaxBlocks;
  return l;
}

std::string this_host() {
  char buf[64] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

void copy_str(char* dst, size_t n, const std::string& s) {
  std::memset(dst, 0, n);
  std::memcpy(dst, s.data(), std::min(n - 1, s.size()));
}

// "rank 2 (prev)": the neighbour a message is about.
std::string who(int peer, const char* role) {
  return detail::concat("rank ", peer, " (", role, ")");
}

// Logs a failed CUDA call of a path that must not throw.
void log_failure(cudaError_t e, const char* what, int rank) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  std::fprintf(stderr, "engine: ipc_ring of rank %d: %s failed: %s\n", rank, what,
               cudaGetErrorString(e));
}

void launch_kernel(ReduceOp op, const ipc::RingArgs& a, int blocks, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:  // a sum, divided by W where each chunk's sum is final
      ipc::ipc_ring_kernel<<<blocks, ipc::kThreads, 0, stream>>>(a, kernels::SumOp{});
      break;
    case ReduceOp::Prod:
      ipc::ipc_ring_kernel<<<blocks, ipc::kThreads, 0, stream>>>(a, kernels::ProdOp{});
      break;
    case ReduceOp::Max:
      ipc::ipc_ring_kernel<<<blocks, ipc::kThreads, 0, stream>>>(a, kernels::MaxOp{});
      break;
    case ReduceOp::Min:
      ipc::ipc_ring_kernel<<<blocks, ipc::kThreads, 0, stream>>>(a, kernels::MinOp{});
      break;
  }
  CUDA_CHECK_LAUNCH();
}

void pause(int polls) {
  if (polls < 200)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 10 : 50));
}

// A store barrier: sets "<prefix><rank>", waits for every rank's key.
void all_ranks_reach(Store& store, const std::string& prefix, int rank, int world, Millis timeout) {
  store.set(prefix + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int q = 0; q < world; ++q) keys.push_back(prefix + std::to_string(q));
  store.wait(keys, timeout);
}

}  // namespace

struct CudaIpcRing::Impl {
  int device = 0, rank = 0;
  int blocks = 1;       // this rank's grid
  int next_blocks = 1;  // next's grid: the done counters in this rank's region
  int64_t seg_elems = 4;
  uint64_t seq = 0;         // the last launched call
  uint64_t generation = 0;  // the next generation to publish
  int64_t cap_chunk = 0, nseg_cap = 0;
  Layout layout;
  char* own = nullptr;         // this rank's region
  char* next = nullptr;        // next's region, opened here
  char* prev = nullptr;        // prev's region, opened here (== next when W == 2)
  Control* ctl = nullptr;      // host-mapped, pinned
  Control* ctl_dev = nullptr;  // its device address
  cudaEvent_t done = nullptr;  // recorded after each kernel
  bool kernel_stuck = false;   // an aborted kernel did not stop: leak rather than free under it
  std::string host, boot;
  char gpu_uuid[16] = {};

  ~Impl();
  void release_peers();
  void new_generation(const CudaIpcRing& ring, int64_t cap, uint64_t done_value);
  char* alloc_region(const Layout& l, uint64_t done_value) const;
  void publish(const CudaIpcRing& ring, const std::string& prefix, char* region, int64_t cap,
               int64_t segs, const Layout& l) const;
  std::pair<PeerInfo, PeerInfo> neighbours(const CudaIpcRing& ring, const std::string& prefix,
                                           int64_t cap, int64_t segs, const Layout& l) const;
  PeerInfo fetch(const CudaIpcRing& ring, const std::string& key, int peer, const char* role) const;
  char* open(const CudaIpcRing& ring, const PeerInfo& info, int peer, const char* role) const;
  void reset_control();
  int failed_block() const;  // a block with a wait record, preferring timeouts; -1 if none
  void wait_kernel(CudaIpcRing& ring, size_t count, ReduceOp op);
  std::string describe(const CudaIpcRing& ring, const WaitRecord& w, size_t count,
                       ReduceOp op) const;
  void drain(const CudaIpcRing& ring);
};

CudaIpcRing::Impl::~Impl() {
  if (kernel_stuck) {
    std::fprintf(stderr,
                 "engine: ipc_ring of rank %d: a kernel did not stop after its abort; its "
                 "memory is left allocated\n",
                 rank);
    return;
  }
  // The guard, not a bare cudaSetDevice: on a thread without a device it must not restore GPU 0.
  std::unique_ptr<cuda::DeviceGuard> guard;
  try {
    guard = std::make_unique<cuda::DeviceGuard>(device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine: ipc_ring of rank %d: %s\n", rank, e.what());
  }
  release_peers();
  if (own) log_failure(cudaFree(own), "cudaFree", rank);
  if (ctl) log_failure(cudaFreeHost(ctl), "cudaFreeHost", rank);
  if (done) log_failure(cudaEventDestroy(done), "cudaEventDestroy", rank);
}

void CudaIpcRing::Impl::release_peers() {
  if (next) log_failure(cudaIpcCloseMemHandle(next), "cudaIpcCloseMemHandle", rank);
  if (prev && prev != next) log_failure(cudaIpcCloseMemHandle(prev), "cudaIpcCloseMemHandle", rank);
  next = prev = nullptr;
}

PeerInfo CudaIpcRing::Impl::fetch(const CudaIpcRing& ring, const std::string& key, int peer,
                                  const char* role) const {
  const std::string v = ring.store_->get(key);
  const std::string name = who(peer, role);
  ENGINE_CHECK(v.size() == sizeof(PeerInfo), "ipc_ring on rank ", ring.rank_, ": store key '", key,
               "' of ", name, " holds ", v.size(), " bytes, expected ", sizeof(PeerInfo),
               " (another program, or another version of it?)");
  PeerInfo p;
  std::memcpy(&p, v.data(), sizeof p);
  const std::string at =
      detail::concat("ipc_ring on rank ", ring.rank_, " (cuda:", device, "): ", name, " ");
  ENGINE_CHECK(p.magic == kMagic && p.version == kVersion, at,
               "published a header this build does not know (magic ", p.magic, ", version ",
               p.version, ")");
  ENGINE_CHECK(p.world == ring.world_ && p.rank == peer, at, "says it is rank ", p.rank, " of ",
               p.world, " (the store key '", key, "' is used by another ring?)");
  ENGINE_CHECK(p.generation == generation, at, "published generation ", p.generation,
               " under the key of generation ", generation);
  // One machine: the same kernel boot (containers of one host share it), else the same name.
  const std::string peer_boot(p.boot_id, strnlen(p.boot_id, sizeof p.boot_id));
  const std::string peer_host(p.host, strnlen(p.host, sizeof p.host));
  ENGINE_CHECK(!peer_boot.empty() && !boot.empty() ? peer_boot == boot : peer_host == host, at,
               "runs on host '", peer_host, "' (boot ", peer_boot, ") and this rank on '", host,
               "' (boot ", boot, "): CUDA IPC needs one host");
  ENGINE_CHECK(p.pid != static_cast<int64_t>(getpid()), at,
               "runs in this process: CUDA IPC needs one process per rank");
  ENGINE_CHECK(p.seg_elems == seg_elems, at, "uses segments of ", p.seg_elems * 4,
               " bytes and this rank ", seg_elems * 4,
               ": every rank must pass the same segment_bytes");
  ENGINE_CHECK(p.blocks >= 1 && p.blocks <= kMaxBlocks, at, "runs ", p.blocks,
               " blocks, outside [1, ", kMaxBlocks, "]");
  return p;
}

char* CudaIpcRing::Impl::open(const CudaIpcRing& ring, const PeerInfo& info, int peer,
                              const char* role) const {
  const std::string name = who(peer, role);
  // A peer GPU that this process sees: it must be reachable by P2P (one that it does not see may
  // still be opened; the driver decides).
  if (std::memcmp(info.gpu_uuid, gpu_uuid, sizeof gpu_uuid) != 0) {
    const int n = cuda::device_count();
    for (int d = 0; d < n; ++d) {
      cudaDeviceProp prop;
      CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
      if (std::memcmp(prop.uuid.bytes, info.gpu_uuid, sizeof info.gpu_uuid) != 0) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, d));
      ENGINE_CHECK(can, "ipc_ring on rank ", ring.rank_, ": cuda:", device, " cannot access ", name,
                   "'s GPU (cuda:", d, " here) as a peer: CUDA IPC needs P2P between them");
    }
  }
  void* p = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&p, info.handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    ENGINE_FAIL("ipc_ring on rank ", ring.rank_, " (cuda:", device,
                "): cudaIpcOpenMemHandle of the region of ", name, " (its cuda:", info.device,
                ") failed: ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")");
  }
  return static_cast<char*>(p);
}

// A cleared region laid out as l, its done counters at done_value; cleared before it returns,
// so before any peer can see its handle.
char* CudaIpcRing::Impl::alloc_region(const Layout& l, uint64_t done_value) const {
  char* fresh = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&fresh), l.nbytes));
  try {
    cudaStream_t s = cuda::comm_stream(device);
    CUDA_CHECK(cudaMemsetAsync(fresh + l.flags, 0, l.nbytes - l.flags, s));
    const std::vector<uint64_t> done_init(kMaxBlocks, done_value);
    if (done_value != 0)
      CUDA_CHECK(cudaMemcpyAsync(fresh + l.done, done_init.data(), sizeof(uint64_t) * kMaxBlocks,
                                 cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
  } catch (...) {
    log_failure(cudaFree(fresh), "cudaFree", rank);
    throw;
  }
  return fresh;
}

// Sets this rank's header and IPC handle of `region` under prefix/<rank> in the store.
void CudaIpcRing::Impl::publish(const CudaIpcRing& ring, const std::string& prefix, char* region,
                                int64_t cap, int64_t segs, const Layout& l) const {
  PeerInfo me;
  std::memset(&me, 0, sizeof me);
  me.magic = kMagic;
  me.version = kVersion;
  me.world = ring.world_;
  me.rank = ring.rank_;
  me.device = device;
  me.blocks = blocks;
  me.pid = static_cast<int64_t>(getpid());
  me.seg_elems = seg_elems;
  me.cap_chunk = cap;
  me.nseg_cap = segs;
  me.generation = generation;
  me.nbytes = l.nbytes;
  copy_str(me.host, sizeof me.host, host);
  copy_str(me.boot_id, sizeof me.boot_id, boot);
  std::memcpy(me.gpu_uuid, gpu_uuid, sizeof gpu_uuid);
  CUDA_CHECK(cudaIpcGetMemHandle(&me.handle, region));
  ring.store_->set(prefix + std::to_string(ring.rank_),
                   std::string(reinterpret_cast<char*>(&me), sizeof me));
}

// Waits for next's and prev's headers of this generation and checks they sized it as this rank.
std::pair<PeerInfo, PeerInfo> CudaIpcRing::Impl::neighbours(const CudaIpcRing& ring,
                                                            const std::string& prefix, int64_t cap,
                                                            int64_t segs, const Layout& l) const {
  const int W = ring.world_, r = ring.rank_;
  const int nx = (r + 1) % W, pv = (r - 1 + W) % W;
  const std::string next_key = prefix + std::to_string(nx), prev_key = prefix + std::to_string(pv);
  try {
    ring.store_->wait({next_key, prev_key}, ring.opts_.timeout);
  } catch (const TimeoutError& e) {
    const bool has_next = ring.store_->check({next_key});
    throw TimeoutError(detail::concat("ipc_ring on rank ", r, " (cuda:", device,
                                      "): ", has_next ? who(pv, "prev") : who(nx, "next"),
                                      " did not publish its IPC region (generation ", generation,
                                      ") within ", seconds_str(ring.opts_.timeout), ": ",
                                      e.what()));
  }
  const PeerInfo ni = fetch(ring, next_key, nx, "next");
  const PeerInfo pi = pv == nx ? ni : fetch(ring, prev_key, pv, "prev");
  for (const PeerInfo* p : {&ni, &pi})
    ENGINE_CHECK(p->cap_chunk == cap && p->nseg_cap == segs && p->nbytes == l.nbytes,
                 "ipc_ring on rank ", r, ": ", who(p->rank, p == &ni ? "next" : "prev"),
                 " sized generation ", generation, " for chunks of ", p->cap_chunk,
                 " elements and this rank for ", cap,
                 ": the ranks called all_reduce with different counts");
  return {ni, pi};
}

// A new region of cap_chunk elements per chunk, its done counters at done_value (the call before
// the one that needs it): allocate, clear, publish, open the neighbours', then drop the old one.
void CudaIpcRing::Impl::new_generation(const CudaIpcRing& ring, int64_t cap, uint64_t done_value) {
  const int W = ring.world_, r = ring.rank_;
  const int nx = (r + 1) % W, pv = (r - 1 + W) % W;
  const int64_t segs = ceil_div(cap, seg_elems);
  const Layout l = layout_of(W, cap, segs);
  char* fresh = alloc_region(l, done_value);
  char* fresh_next = nullptr;
  char* fresh_prev = nullptr;
  try {
    const std::string prefix = detail::concat(ring.opts_.key, "/", generation, "/");
    publish(ring, prefix, fresh, cap, segs, l);
    const auto [ni, pi] = neighbours(ring, prefix, cap, segs, l);
    fresh_next = open(ring, ni, nx, "next");
    fresh_prev = pv == nx ? fresh_next : open(ring, pi, pv, "prev");
    next_blocks = ni.blocks;
  } catch (...) {
    if (fresh_next) log_failure(cudaIpcCloseMemHandle(fresh_next), "cudaIpcCloseMemHandle", rank);
    log_failure(cudaFree(fresh), "cudaFree", rank);
    throw;
  }
  // The old generation is quiet: next published this one after its last call had ended, i.e.
  // after its last done write into our old region, and prev's writes into it all arrived before
  // our last call ended. Nobody touches it again.
  release_peers();
  if (own) log_failure(cudaFree(own), "cudaFree", rank);
  own = fresh;
  next = fresh_next;
  prev = fresh_prev;
  cap_chunk = cap;
  nseg_cap = segs;
  layout = l;
  ++generation;
}

void CudaIpcRing::Impl::reset_control() {
  volatile Control* c = ctl;
  c->abort = 0;
  for (int b = 0; b < kMaxBlocks; ++b) c->waits[b].state = ipc::WaitState::None;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

int CudaIpcRing::Impl::failed_block() const {
  const volatile Control* c = ctl;
  int found = -1;
  for (int b = 0; b < blocks; ++b) {
    const uint32_t s = c->waits[b].state;
    if (s == ipc::WaitState::TimedOut) return b;
    if (s == ipc::WaitState::Aborted && found < 0) found = b;
  }
  return found;
}

std::string CudaIpcRing::Impl::describe(const CudaIpcRing& ring, const WaitRecord& w, size_t count,
                                        ReduceOp op) const {
  const int W = ring.world_, r = ring.rank_;
  std::string what;
  if (w.unit < 0) {
    what = detail::concat(who((r + 1) % W, "next"), " to finish call #", seq - 1, " (its block ",
                          w.chunk, " is at #", w.seen, ")");
  } else {
    const bool rs = w.unit <= W - 1;
    what = detail::concat(
        who((r - 1 + W) % W, "prev"), " to deliver ", rs ? "reduce-scatter" : "all-gather",
        " step ", rs ? w.unit - 1 : w.unit - W, " (chunk ", w.chunk, ", segment ", w.segment, ")");
  }
  const Millis waited(static_cast<int64_t>(w.waited_ns / 1000000));
  return detail::concat(
      "ipc_ring all_reduce #", seq, " of ", count, " floats (", reduce_op_name(op), ") on rank ", r,
      " of ", W, " (cuda:", device, "): ",
      w.state == ipc::WaitState::TimedOut ? "timed out after " : "aborted by the host after ",
      seconds_str(waited), " waiting for ", what, " (timeout ", seconds_str(ring.opts_.timeout),
      "); the ring is broken");
}

// Polls the kernel's event until it ends; a wait record, the host deadline or a CUDA error make
// the call fail (the caller leaves the ring broken).
void CudaIpcRing::Impl::wait_kernel(CudaIpcRing& ring, size_t count, ReduceOp op) {
  const Deadline deadline = Deadline::after(ring.opts_.timeout + kHostGrace);
  volatile Control* c = ctl;
  bool aborted = false;
  Clock::time_point abort_at{};
  for (int polls = 0;; ++polls) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) CUDA_CHECK(e);  // a fault in the kernel
    if (!aborted && (failed_block() >= 0 || deadline.expired())) {
      c->abort = 1;  // the other blocks stop at their next check
      aborted = true;
      abort_at = Clock::now();
    }
    if (aborted && Clock::now() - abort_at > kStopWait) {
      kernel_stuck = true;
      throw TimeoutError(detail::concat("ipc_ring all_reduce #", seq, " of ", count,
                                        " floats on rank ", ring.rank_, " of ", ring.world_,
                                        " (cuda:", device, "): did not complete within ",
                                        seconds_str(ring.opts_.timeout),
                                        " and its kernel did not stop when aborted; the ring "
                                        "is broken"));
    }
    pause(polls);
  }
  const int b = failed_block();
  if (b < 0) return;  // finished (even if the host had asked it to stop: it did not need to)
  WaitRecord w;
  w.state = c->waits[b].state;
  w.unit = c->waits[b].unit;
  w.chunk = c->waits[b].chunk;
  w.segment = c->waits[b].segment;
  w.waited_ns = c->waits[b].waited_ns;
  w.seen = c->waits[b].seen;
  w.wanted = c->waits[b].wanted;
  throw TimeoutError(describe(ring, w, count, op));
}

// Before freeing the region: next writes its done counters into it at the end of each call.
void CudaIpcRing::Impl::drain(const CudaIpcRing& ring) {
  const Deadline deadline = Deadline::after(std::min(ring.opts_.timeout, kDrainWait));
  cudaStream_t s = cuda::comm_stream(device);
  uint64_t d[kMaxBlocks];
  for (;;) {
    CUDA_CHECK(cudaMemcpyAsync(d, own + layout.done, sizeof d, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    bool all = true;
    for (int k = 0; k < next_blocks; ++k) all = all && d[k] >= seq;
    if (all || deadline.expired()) return;
    std::this_thread::sleep_for(Millis(1));
  }
}

CudaIpcRing::CudaIpcRing(std::shared_ptr<Store> store, int rank, int world, int device,
                         IpcRingOptions opts)
    : DeviceGroup(rank, world, device),
      opts_(std::move(opts)),
      store_(std::move(store)),
      impl_(std::make_unique<Impl>()) {
  ENGINE_CHECK(store_ != nullptr, "ipc_ring init: no store");
  ENGINE_CHECK(world_ >= 1 && rank_ >= 0 && rank_ < world_, "ipc_ring init: rank ", rank_,
               " of world ", world_);
  check_cuda_device(device_, detail::concat("ipc_ring init on rank ", rank_));
  ENGINE_CHECK(opts_.blocks >= 1, "ipc_ring init on rank ", rank_, ": blocks ", opts_.blocks,
               " < 1");
  ENGINE_CHECK(opts_.timeout.count() > 0, "ipc_ring init on rank ", rank_, ": timeout ",
               opts_.timeout.count(), " ms");
  ran_ = opts_.protocol;
  Impl& m = *impl_;
  m.device = device_;
  m.rank = rank_;
  m.seg_elems = std::max<int64_t>(4, static_cast<int64_t>(opts_.segment_bytes / 16) * 4);
  if (world_ == 1) return;  // all_reduce over one rank moves nothing
  cuda::DeviceGuard guard(device_);
  if (opts_.protocol != IpcProtocol::Blocking) {
    try {
      if (opts_.protocol == IpcProtocol::Events)
        chain_ = std::make_unique<EventChain>(*store_, rank_, world_, device_, opts_);
      else
        proto_ = std::make_unique<ProtoRing>(*store_, rank_, world_, device_, opts_);
    } catch (...) {
      broken_ = true;
      throw;
    }
    if (chain_) return;  // ran_ stays Events
    ran_ = ipc::proto::ring_protocol(opts_.protocol, proto_->mode() == "time-sliced");
    if (ran_ == opts_.protocol) return;
    // Auto, time-sliced: every rank read the same headers, so every rank is here. Each frees its
    // region once all have opened theirs, then sets up what ran_ says.
    sliced_mode_ = proto_->mode();
    all_ranks_reach(*store_, opts_.key + "/proto_opened/", rank_, world_, opts_.timeout);
    proto_.reset();
    if (ran_ == IpcProtocol::Events) {
      try {
        chain_ = std::make_unique<EventChain>(*store_, rank_, world_, device_, opts_);
      } catch (...) {
        broken_ = true;
        throw;
      }
      return;
    }
  }
  int sms = 0, uva = 0, map_host = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
  CUDA_CHECK(cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, device_));
  CUDA_CHECK(cudaDeviceGetAttribute(&map_host, cudaDevAttrCanMapHostMemory, device_));
  ENGINE_CHECK(uva && map_host, "ipc_ring init on rank ", rank_, ": cuda:", device_,
               " lacks unified addressing or mapped host memory, which CUDA IPC needs");
  // Few enough blocks that all stay resident beside other work (each spins on its peers).
  m.blocks = std::clamp(opts_.blocks, 1, std::max(1, std::min(kMaxBlocks, sms / 2)));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  std::memcpy(m.gpu_uuid, prop.uuid.bytes, sizeof m.gpu_uuid);
  m.host = this_host();
  m.boot = boot_id();
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.ctl), sizeof(Control), cudaHostAllocMapped));
  std::memset(static_cast<void*>(m.ctl), 0, sizeof(Control));
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.ctl_dev), m.ctl, 0));
  CUDA_CHECK(cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming));
  try {
    m.new_generation(*this, 0, 0);  // an empty region: checks the peers now, grows on first use
  } catch (...) {
    broken_ = true;
    throw;
  }
}

CudaIpcRing::~CudaIpcRing() {
  proto_.reset();
  chain_.reset();
  if (!impl_) return;
  if (!broken_ && world_ > 1 && impl_->seq > 0 && impl_->own) {
    try {
      cuda::DeviceGuard guard(device_);
      impl_->drain(*this);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "engine: ipc_ring of rank %d: %s\n", rank_, e.what());
    }
  }
  impl_.reset();
}

void CudaIpcRing::all_reduce(void* data, size_t count, DType dtype, ReduceOp op,
                             const cuda::Event* ready) {
  check_call(data, count, dtype, op);
  ENGINE_CHECK(ready == nullptr || ready->device() == device_, "ipc_ring all_reduce on rank ",
               rank_, ": the ready event is of cuda:", ready ? ready->device() : -1,
               ", this ring runs on cuda:", device_);
  ENGINE_CHECK(count < (size_t(1) << 40), "ipc_ring all_reduce on rank ", rank_, ": count ", count,
               " is too large");
  if (count == 0 || world_ == 1) return;  // nothing to move (AVG over one rank divides by 1)
  cuda::DeviceGuard guard(device_);
  if (chain_) {  // queued as proto_ below
    broken_ = true;
    chain_->enqueue(static_cast<float*>(data), static_cast<int64_t>(count), op, ready);
    chain_->compute_waits_last();
    broken_ = false;
    return;
  }
  if (proto_) {  // queued; the compute stream waits for it on the device
    broken_ = true;
    proto_->enqueue(static_cast<float*>(data), static_cast<int64_t>(count), op, ready);
    proto_->compute_waits_last();
    broken_ = false;
    return;
  }
  cudaPointerAttributes attr;
  CUDA_CHECK(cudaPointerGetAttributes(&attr, data));
  ENGINE_CHECK((attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
                   attr.device == device_,
               "ipc_ring all_reduce on rank ", rank_,
               ": the buffer is not memory of cuda:", device_);
  Impl& m = *impl_;
  const RingSchedule sched = ipc::ring_schedule(static_cast<int64_t>(count), rank_, world_);
  const auto max_chunk = static_cast<int64_t>(sched.max_chunk());  // a multiple of 4
  broken_ = true;  // until this call has succeeded: every throw below leaves the ring broken
  const uint64_t seq = m.seq + 1;
  if (max_chunk > m.cap_chunk)
    m.new_generation(*this, round_up(std::max(max_chunk, m.cap_chunk + m.cap_chunk / 2), 4),
                     seq - 1);

  cudaStream_t stream = cuda::comm_stream(device_);
  cuda::comm_after(device_, ready);
  ipc::RingArgs a;
  a.data = static_cast<float*>(data);
  a.own_rs = reinterpret_cast<const float*>(m.own + m.layout.rs);
  a.own_ag = reinterpret_cast<const float*>(m.own + m.layout.ag);
  a.own_flags = reinterpret_cast<const uint64_t*>(m.own + m.layout.flags);
  a.own_done = reinterpret_cast<const uint64_t*>(m.own + m.layout.done);
  a.next_rs = reinterpret_cast<float*>(m.next + m.layout.rs);
  a.next_ag = reinterpret_cast<float*>(m.next + m.layout.ag);
  a.next_flags = reinterpret_cast<uint64_t*>(m.next + m.layout.flags);
  a.prev_done = reinterpret_cast<uint64_t*>(m.prev + m.layout.done);
  a.ctl = m.ctl_dev;
  a.seq = seq;
  a.timeout_ns = static_cast<uint64_t>(opts_.timeout.count()) * 1000000ull;
  a.count = static_cast<int64_t>(count);
  a.seg_elems = m.seg_elems;
  a.nseg = static_cast<int64_t>(sched.segments(static_cast<size_t>(m.seg_elems)));
  a.nseg_cap = m.nseg_cap;
  a.rank = rank_;
  a.world = world_;
  a.next_blocks = m.next_blocks;
  a.avg = op == ReduceOp::Avg;
  a.vec = reinterpret_cast<uintptr_t>(data) % 16 == 0;
  m.reset_control();
  m.seq = seq;
  launch_kernel(op, a, m.blocks, stream);
  CUDA_CHECK(cudaEventRecord(m.done, stream));
  m.wait_kernel(*this, count, op);
  broken_ = false;
}

cuda::Event CudaIpcRing::all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready) {
  ENGINE_CHECK(stream_ordered(), "ipc_ring all_reduce_queued on rank ", rank_,
               ": the blocking protocol cannot queue (choose auto, ll, simple or events)");
  ENGINE_CHECK(t.defined() && t.device() == Device::cuda(device_), "ipc_ring all_reduce on rank ",
               rank_, ": the tensor is not on cuda:", device_);
  check_call(t.raw_data(), static_cast<size_t>(t.numel()), t.dtype(), op);
  cuda::DeviceGuard guard(device_);
  if (t.numel() > 0 && world_ > 1) {
    broken_ = true;
    if (chain_)
      chain_->enqueue(static_cast<float*>(t.raw_data()), t.numel(), op, &ready);
    else
      proto_->enqueue(static_cast<float*>(t.raw_data()), t.numel(), op, &ready);
    broken_ = false;
  }
  return cuda::Event::record(device_, cuda::Stream::Comm);
}

void CudaIpcRing::check() const {
  if (proto_) proto_->check();
  if (chain_) chain_->check();
}

std::string CudaIpcRing::mode() const {
  if (chain_) return chain_->mode();
  return proto_ ? proto_->mode() : sliced_mode_;
}

std::string CudaIpcRing::unsupported_reason(int device) {
  const int n = cuda::device_count();
  if (n == 0) return cuda::unavailable_reason();
  if (std::string p = cuda_device_problem(device); !p.empty()) return p;
  auto failed = [](cudaError_t e, const char* what) {
    (void)cudaGetLastError();
    return detail::concat(what, " failed: ", cudaGetErrorString(e));
  };
  int uva = 0, map_host = 0;
  cudaError_t e = cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, device);
  if (e != cudaSuccess) return failed(e, "cudaDeviceGetAttribute");
  e = cudaDeviceGetAttribute(&map_host, cudaDevAttrCanMapHostMemory, device);
  if (e != cudaSuccess) return failed(e, "cudaDeviceGetAttribute");
  if (!uva) return detail::concat("cuda:", device, " has no unified addressing");
  if (!map_host) return detail::concat("cuda:", device, " cannot map host memory");
  // P2P is asked of the two ring neighbours' GPUs only (comm/backends/cuda_ipc/ipc_peers.h), not of
  // every GPU. Whether this platform exports device memory at all (not under WSL, for one).
  std::string why;
  try {
    cuda::DeviceGuard guard(device);
    void* p = nullptr;
    e = cudaMalloc(&p, 256);
    if (e != cudaSuccess) return failed(e, "cudaMalloc");
    cudaIpcMemHandle_t h;
    e = cudaIpcGetMemHandle(&h, p);
    if (e != cudaSuccess) why = failed(e, "cudaIpcGetMemHandle");
    log_failure(cudaFree(p), "cudaFree", -1);
  } catch (const std::exception& ex) {
    why = ex.what();
  }
  return why;
}

}  // namespace engine::comm
