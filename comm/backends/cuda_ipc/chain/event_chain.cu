// comm/backends/cuda_ipc/chain/event_chain.cu: the event-chained CUDA IPC ring (event_chain.h):
// connect (IPC events and the shared counters through the store), the buffer and its generations,
// the per-call steps (run.h over CUDA streams and IPC events), the watchdog on each call's event.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "comm/backends/cuda_ipc/chain/event_chain.h"
#include "comm/backends/cuda_ipc/chain/run.h"
#include "comm/backends/cuda_ipc/chain/shared_segment.h"
#include "comm/backends/cuda_ipc/chain/step_kernel.cuh"
#include "comm/backends/cuda_ipc/host_probe.cuh"
#include "comm/health/watchdog.h"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"
#include "kernels/reduce.h"

namespace engine::comm {
namespace {

using ipc::mps_daemon_running;
using ipc::PooledProbe;
using ipc::read_line;
using ipc::str_of;

namespace ch = ipc::chain;
constexpr int K = ch::kEventSlots;
constexpr uint32_t kMagic = 0x4e484349;  // "ICHN"
constexpr uint32_t kVersion = 1;
constexpr Millis kHostGrace(2000);  // a call's GPU work: its timeout plus this
constexpr Millis kDrainWait(5000);  // the destructor's waits

// What a rank publishes under "<key>/chain/<rank>".
struct Header {
  uint32_t magic, version;
  int32_t world, rank, device, mps;
  int64_t pid;
  char host[64];
  char boot_id[40];
  char gpu_uuid[16];
  cudaIpcEventHandle_t ev[K];
};
static_assert(std::is_trivially_copyable_v<Header>);

// A buffer generation, under "<key>/chain/buf/<generation>/<rank>".
struct BufInfo {
  uint32_t magic;
  int32_t rank;
  uint64_t generation;
  int64_t cap;
  cudaIpcMemHandle_t handle;
};
static_assert(std::is_trivially_copyable_v<BufInfo>);

void log_failure(cudaError_t e, const char* what, int rank) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  std::fprintf(stderr, "engine: ipc_ring (events) of rank %d: %s failed: %s\n", rank, what,
               cudaGetErrorString(e));
}

template <class Op>
void launch_op(const ch::StepArgs& a, int blocks, cudaStream_t s, Op op) {
  ch::chain_step_kernel<<<blocks, ch::kStepThreads, 0, s>>>(a, op);
  CUDA_CHECK_LAUNCH();
}

// One step's kernel: enough blocks of 256 threads (4 floats each) to fill the GPU.
void launch_step(const ch::StepArgs& a, ReduceOp op, int max_blocks, cudaStream_t s) {
  const int64_t per_block = ch::kStepThreads * 4;
  const int blocks = static_cast<int>(
      std::clamp<int64_t>((a.n + per_block - 1) / per_block, 1, std::max(1, max_blocks)));
  switch (op) {
    case ReduceOp::Prod:
      return launch_op(a, blocks, s, kernels::ProdOp{});
    case ReduceOp::Max:
      return launch_op(a, blocks, s, kernels::MaxOp{});
    case ReduceOp::Min:
      return launch_op(a, blocks, s, kernels::MinOp{});
    default:  // Sum, and Avg: a sum divided by W where it is final
      return launch_op(a, blocks, s, kernels::SumOp{});
  }
}

// Polls `ev` until it completed (true) or `deadline` passed (false); throws on a CUDA error.
bool wait_event(cudaEvent_t ev, const Deadline& deadline) {
  for (int polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) CUDA_CHECK(q);
    if (deadline.expired()) return false;
    if (polls < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

struct EventChain::Impl {
  int rank = 0, world = 1, device = 0, left = 0, right = 0, sms = 1;
  IpcRingOptions opts;
  Store* store = nullptr;
  std::string mode;
  cudaStream_t stream = nullptr;
  cudaEvent_t own_ev[K] = {}, left_ev[K] = {}, right_ev[K] = {};  // right_ev == left_ev: W == 2
  std::unique_ptr<ch::SharedSegment> seg;
  float* buf = nullptr;       // [cap], this rank's; right maps it
  float* left_buf = nullptr;  // [cap], left's, mapped here
  int64_t cap = 0;
  uint64_t generation = 0;
  ch::ChainState st;
  std::mutex pool_mu;
  std::vector<cudaEvent_t> pool;
  cudaEvent_t last = nullptr;  // the last call's (owned by its probe until it ends)
  bool stuck = false;          // the GPU work did not end: leak rather than free under it
  std::unique_ptr<Watchdog> watchdog;
  std::unordered_set<const void*> checked;

  // run.h's device operations on this rank's comm stream.
  struct Ops {
    Impl& m;
    float* data;
    ReduceOp op;
    void stream_wait(int peer, int slot) {
      cudaEvent_t e = peer == m.left ? m.left_ev[slot] : m.right_ev[slot];
      CUDA_CHECK(cudaStreamWaitEvent(m.stream, e, 0));
    }
    void record(int slot) { CUDA_CHECK(cudaEventRecord(m.own_ev[slot], m.stream)); }
    bool peer_done(int peer, int slot) {
      const cudaError_t q = cudaEventQuery(peer == m.left ? m.left_ev[slot] : m.right_ev[slot]);
      if (q == cudaErrorNotReady) return false;
      CUDA_CHECK(q);
      return true;
    }
    void launch(const ch::StepWork& w) {
      ch::StepArgs a;
      a.n = static_cast<int64_t>(w.range.size());
      if (a.n == 0) return;
      const size_t b = w.range.begin;
      a.buf = m.buf + b;
      a.data = data + b;
      a.left = m.left_buf + b;
      a.kind = w.kind;
      a.to_data = w.to_data;
      a.divide_by = w.divide ? static_cast<float>(m.world) : 0.f;
      const auto bits = reinterpret_cast<uintptr_t>(a.buf) | reinterpret_cast<uintptr_t>(a.data) |
                        reinterpret_cast<uintptr_t>(a.left);
      a.vec = bits % 16 == 0;
      launch_step(a, op, 4 * m.sms, m.stream);
    }
  };

  std::string at() const {
    return detail::concat("ipc_ring (events) on rank ", rank, " of ", world, " (cuda:", device,
                          ")");
  }
  Header header() const;
  std::vector<Header> exchange(const Header& me);
  void check_peer(const Header& me, const Header& p, int q) const;
  void open_events(const Header& l, const Header& r);
  void grow(int64_t count);
  BufInfo neighbour_buf(const std::string& prefix, int q, const char* role) const;
  cudaEvent_t take_event();
  void give_event(cudaEvent_t e);
  void start_watchdog();
  void drain();
  void release();
};

Header EventChain::Impl::header() const {
  Header h;
  std::memset(&h, 0, sizeof h);
  h.magic = kMagic;
  h.version = kVersion;
  h.world = world;
  h.rank = rank;
  h.device = device;
  h.mps = mps_daemon_running() ? 1 : 0;
  h.pid = static_cast<int64_t>(getpid());
  char host[64] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  std::memcpy(h.host, host, sizeof h.host);
  const std::string boot = read_line("/proc/sys/kernel/random/boot_id");
  std::memcpy(h.boot_id, boot.data(), std::min(boot.size(), sizeof h.boot_id - 1));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::memcpy(h.gpu_uuid, prop.uuid.bytes, sizeof h.gpu_uuid);
  for (int s = 0; s < K; ++s) CUDA_CHECK(cudaIpcGetEventHandle(&h.ev[s], own_ev[s]));
  return h;
}

void EventChain::Impl::check_peer(const Header& me, const Header& p, int q) const {
  const std::string who = detail::concat(at(), ": rank ", q, " ");
  ENGINE_CHECK(p.magic == kMagic && p.version == kVersion, who,
               "published a header this build does not know");
  ENGINE_CHECK(p.world == world && p.rank == q, who, "says it is rank ", p.rank, " of ", p.world);
  const std::string pb = str_of(p.boot_id, sizeof p.boot_id),
                    mb = str_of(me.boot_id, sizeof me.boot_id);
  const std::string ph = str_of(p.host, sizeof p.host), mh = str_of(me.host, sizeof me.host);
  ENGINE_CHECK(!pb.empty() && !mb.empty() ? pb == mb : ph == mh, who, "runs on host '", ph,
               "' and this rank on '", mh, "': CUDA IPC needs one host");
  ENGINE_CHECK(p.pid != me.pid, who, "runs in this process: CUDA IPC needs one process per rank");
}

// Publishes this rank's header, waits for every rank's, checks them and decides the mode.
std::vector<Header> EventChain::Impl::exchange(const Header& me) {
  const std::string prefix = opts.key + "/chain/";
  store->set(prefix + std::to_string(rank),
             std::string(reinterpret_cast<const char*>(&me), sizeof me));
  std::vector<std::string> keys;
  for (int q = 0; q < world; ++q) keys.push_back(prefix + std::to_string(q));
  try {
    store->wait(keys, opts.timeout);
  } catch (const TimeoutError& e) {
    int missing = 0;
    while (missing < world && store->check({keys[missing]})) ++missing;
    throw TimeoutError(detail::concat(at(), ": rank ", missing,
                                      " did not publish its IPC events within ",
                                      seconds_str(opts.timeout), ": ", e.what()));
  }
  std::vector<Header> all(world);
  bool shared = false, all_mps = me.mps != 0;
  for (int q = 0; q < world; ++q) {
    const std::string v = store->get(keys[q]);
    ENGINE_CHECK(v.size() == sizeof(Header), at(), ": store key '", keys[q], "' holds ", v.size(),
                 " bytes, expected ", sizeof(Header));
    std::memcpy(&all[q], v.data(), sizeof(Header));
    if (q == rank) continue;
    check_peer(me, all[q], q);
    shared = shared || std::memcmp(all[q].gpu_uuid, me.gpu_uuid, sizeof me.gpu_uuid) == 0;
    all_mps = all_mps && all[q].mps != 0;
  }
  mode = shared && !all_mps ? "time-sliced" : "concurrent";
  return all;
}

void EventChain::Impl::open_events(const Header& l, const Header& r) {
  for (int s = 0; s < K; ++s) {
    for (int side = 0; side < (left == right ? 1 : 2); ++side) {
      const Header& h = side == 0 ? l : r;
      cudaEvent_t* ev = side == 0 ? &left_ev[s] : &right_ev[s];
      const cudaError_t e = cudaIpcOpenEventHandle(ev, h.ev[s]);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        ENGINE_FAIL(at(), ": cudaIpcOpenEventHandle of rank ", h.rank, "'s event ", s,
                    " failed: ", cudaGetErrorString(e));
      }
    }
    if (left == right) right_ev[s] = left_ev[s];
  }
}

BufInfo EventChain::Impl::neighbour_buf(const std::string& prefix, int q, const char* role) const {
  const std::string key = prefix + std::to_string(q);
  try {
    store->wait({key}, opts.timeout);
  } catch (const TimeoutError& e) {
    throw TimeoutError(detail::concat(at(), ": rank ", q, " (", role,
                                      ") did not publish its buffer of generation ", generation,
                                      " within ", seconds_str(opts.timeout), ": ", e.what()));
  }
  const std::string v = store->get(key);
  ENGINE_CHECK(v.size() == sizeof(BufInfo), at(), ": store key '", key, "' holds ", v.size(),
               " bytes, expected ", sizeof(BufInfo));
  BufInfo b;
  std::memcpy(&b, v.data(), sizeof b);
  ENGINE_CHECK(b.magic == kMagic && b.rank == q && b.generation == generation, at(), ": rank ", q,
               " (", role, ") published another ring's buffer under '", key, "'");
  return b;
}

// A buffer for `count` floats: when the current one is smaller, every rank (all call with the same
// count) makes a larger one, publishes it, opens left's and frees its old one. The old ones are
// quiet: this rank's queued steps ended (the last call's event), and right published its new one
// only after its own steps, the last readers of this rank's old buffer, ended.
void EventChain::Impl::grow(int64_t count) {
  const int64_t need = (count + 3) / 4 * 4;
  if (need <= cap) return;
  const int64_t new_cap = std::max(need, (cap + cap / 2 + 3) / 4 * 4);
  if (last && !wait_event(last, Deadline::after(opts.timeout)))
    throw TimeoutError(detail::concat(at(), ": the last all_reduce did not finish within ",
                                      seconds_str(opts.timeout), " (growing the buffer)"));
  float* fresh = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&fresh), sizeof(float) * new_cap));
  void* fresh_left = nullptr;
  try {
    BufInfo me;
    std::memset(&me, 0, sizeof me);
    me.magic = kMagic;
    me.rank = rank;
    me.generation = generation;
    me.cap = new_cap;
    CUDA_CHECK(cudaIpcGetMemHandle(&me.handle, fresh));
    const std::string prefix = detail::concat(opts.key, "/chain/buf/", generation, "/");
    store->set(prefix + std::to_string(rank), std::string(reinterpret_cast<char*>(&me), sizeof me));
    const BufInfo l = neighbour_buf(prefix, left, "left");
    const BufInfo r = right == left ? l : neighbour_buf(prefix, right, "right");
    for (const BufInfo* p : {&l, &r})
      ENGINE_CHECK(p->cap == new_cap, at(), ": rank ", p->rank, " sized its buffer for ", p->cap,
                   " floats and this rank for ", new_cap,
                   ": the ranks called all_reduce with different counts");
    const cudaError_t e =
        cudaIpcOpenMemHandle(&fresh_left, l.handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      ENGINE_FAIL(at(), ": cudaIpcOpenMemHandle of the buffer of rank ", left,
                  " (left) failed: ", cudaGetErrorString(e));
    }
  } catch (...) {
    log_failure(cudaFree(fresh), "cudaFree", rank);
    throw;
  }
  if (left_buf) log_failure(cudaIpcCloseMemHandle(left_buf), "cudaIpcCloseMemHandle", rank);
  if (buf) log_failure(cudaFree(buf), "cudaFree", rank);
  buf = fresh;
  left_buf = static_cast<float*>(fresh_left);
  cap = new_cap;
  ++generation;
}

cudaEvent_t EventChain::Impl::take_event() {
  {
    std::lock_guard<std::mutex> lk(pool_mu);
    if (!pool.empty()) {
      cudaEvent_t e = pool.back();
      pool.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;  // the pool grows to the calls in flight, once
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void EventChain::Impl::give_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lk(pool_mu);
  pool.push_back(e);
}

// Watches each call's event (comm/health/watchdog.h): GPU work that does not end within the
// timeout (a neighbour's step never ran) breaks the ring; the next call or check() throws.
void EventChain::Impl::start_watchdog() {
  Watchdog::Hooks h;
  h.on_start = [this] {
    try {
      cuda::set_thread_device(device);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "engine: ipc_ring (events) watchdog of rank %d: %s\n", rank, e.what());
    }
  };
  h.async_error = [] { return std::string(); };
  h.describe = [this](const std::string& what, const std::string& why) {
    return detail::concat("ipc_ring (events) ", what, " on rank ", rank, " of ", world,
                          " (cuda:", device, ") ", why, " (timeout ", seconds_str(opts.timeout),
                          "; its steps wait on the GPU for rank ", left, " (left) and rank ", right,
                          " (right)); the ring is broken");
  };
  h.abort = [this] { std::fprintf(stderr, "engine: %s\n", watchdog->error().c_str()); };
  watchdog = std::make_unique<Watchdog>(std::move(h), Millis(2));
}

// Before freeing: this rank's queued steps end, and so does right's last step, which reads this
// rank's buffer (bounded; a step that never ends keeps the memory).
void EventChain::Impl::drain() {
  if (!last) return;
  if (!wait_event(last, Deadline::after(opts.timeout + kHostGrace))) {
    stuck = true;
    return;
  }
  const Deadline deadline = Deadline::after(std::min(opts.timeout, kDrainWait));
  const uint64_t& rr = seg->shared().ranks[right].recorded;
  while (ch::load_acquire(rr) < st.step) {
    if (deadline.expired()) {
      std::fprintf(stderr,
                   "engine: ipc_ring (events) of rank %d: rank %d (right) did not record step "
                   "%llu before this ring closed\n",
                   rank, right, static_cast<unsigned long long>(st.step));
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  CUDA_CHECK(cudaStreamWaitEvent(stream, right_ev[ch::event_slot(st.step)], 0));
  cudaEvent_t e = take_event();
  CUDA_CHECK(cudaEventRecord(e, stream));
  if (!wait_event(e, deadline)) stuck = true;
  give_event(e);
}

void EventChain::Impl::release() {
  if (left_buf) log_failure(cudaIpcCloseMemHandle(left_buf), "cudaIpcCloseMemHandle", rank);
  if (buf) log_failure(cudaFree(buf), "cudaFree", rank);
  left_buf = buf = nullptr;
  for (int s = 0; s < K; ++s) {
    if (left_ev[s]) log_failure(cudaEventDestroy(left_ev[s]), "cudaEventDestroy", rank);
    if (right_ev[s] && right_ev[s] != left_ev[s])
      log_failure(cudaEventDestroy(right_ev[s]), "cudaEventDestroy", rank);
    if (own_ev[s]) log_failure(cudaEventDestroy(own_ev[s]), "cudaEventDestroy", rank);
    left_ev[s] = right_ev[s] = own_ev[s] = nullptr;
  }
  for (cudaEvent_t e : pool) log_failure(cudaEventDestroy(e), "cudaEventDestroy", rank);
  pool.clear();
  seg.reset();
}

EventChain::EventChain(Store& store, int rank, int world, int device, const IpcRingOptions& opts)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.rank = rank;
  m.world = world;
  m.device = device;
  m.left = (rank - 1 + world) % world;
  m.right = (rank + 1) % world;
  m.opts = opts;
  m.store = &store;
  ENGINE_CHECK(world >= 2 && world <= ch::kMaxRanks, m.at(),
               ": --cuda-ring-protocol events takes 2 to ", ch::kMaxRanks, " ranks");
  cuda::DeviceGuard guard(device);
  CUDA_CHECK(cudaDeviceGetAttribute(&m.sms, cudaDevAttrMultiProcessorCount, device));
  m.stream = cuda::comm_stream(device);
  try {
    for (int s = 0; s < K; ++s)
      CUDA_CHECK(
          cudaEventCreateWithFlags(&m.own_ev[s], cudaEventDisableTiming | cudaEventInterprocess));
    const std::vector<Header> all = m.exchange(m.header());
    m.seg =
        std::make_unique<ch::SharedSegment>(store, opts.key + "/chain", rank, world, opts.timeout);
    m.open_events(all[m.left], all[m.right]);
  } catch (...) {  // no destructor runs: free what is ours (nothing was queued)
    m.release();
    throw;
  }
  m.start_watchdog();
}

EventChain::~EventChain() {
  Impl& m = *impl_;
  try {
    cuda::DeviceGuard guard(m.device);
    m.drain();
    m.watchdog.reset();  // its probes hand their events back
    if (m.stuck) {
      std::fprintf(stderr,
                   "engine: ipc_ring (events) of rank %d: queued steps did not end; their memory "
                   "is left allocated\n",
                   m.rank);
      return;
    }
    m.release();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine: ipc_ring (events) of rank %d: %s\n", m.rank, e.what());
  }
}

const std::string& EventChain::mode() const {
  return impl_->mode;
}

void EventChain::check() const {
  const std::string e = impl_->watchdog ? impl_->watchdog->error() : "";
  if (e.empty()) return;
  if (impl_->watchdog->timed_out()) throw TimeoutError(e);
  throw Error(e);
}

void EventChain::enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready) {
  check();
  Impl& m = *impl_;
  if (!m.checked.count(data)) {
    cudaPointerAttributes attr;
    CUDA_CHECK(cudaPointerGetAttributes(&attr, data));
    ENGINE_CHECK((attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
                     attr.device == m.device,
                 "ipc_ring all_reduce on rank ", m.rank,
                 ": the buffer is not memory of cuda:", m.device);
    if (m.checked.size() > 4096) m.checked.clear();
    m.checked.insert(data);
  }
  m.grow(count);
  cuda::comm_after(m.device, ready);
  Impl::Ops ops{m, data, op};
  ch::CallSpec c;
  c.rank = m.rank;
  c.world = m.world;
  c.count = static_cast<size_t>(count);
  c.op = op;
  c.timeout = m.opts.timeout;
  ch::run_call(m.seg->shared(), ops, c, m.st);
  cudaEvent_t ev = m.take_event();
  CUDA_CHECK(cudaEventRecord(ev, m.stream));
  m.last = ev;
  Impl* im = &m;
  m.watchdog->watch(std::make_unique<PooledProbe>(ev, [im](cudaEvent_t e) { im->give_event(e); }),
                    Deadline::after(m.opts.timeout + kHostGrace),
                    detail::concat("all_reduce #", m.st.seq, " of ", count, " floats (",
                                   reduce_op_name(op), ")"));
}

void EventChain::compute_waits_last() {
  if (impl_->last)
    CUDA_CHECK(cudaStreamWaitEvent(cuda::compute_stream(impl_->device), impl_->last, 0));
}

}  // namespace engine::comm
