// comm/backends/cuda_ipc/chain/event_chain.cu: the event-chained CUDA IPC ring (make_event_chain,
// queued_ring.h; docs/ring.md "Time-sliced ranks"): for ranks that share a GPU without MPS, where a
// kernel that spins on another context's writes holds the GPU for its whole time slice. Each
// all_reduce is 2W-1 steps (plan.h), each one plain kernel on the comm stream that first waits, on
// the device, for both ring neighbours' previous step through their CUDA IPC events (run.h; the
// host only waits for the neighbours to have enqueued it, through counters in a POSIX shm segment).
// Nothing spins on the GPU. Here: connect (the IPC events and the shared counters through the
// store), the buffer and its generations, the per-call steps, the watchdog on each call's event.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "comm/backends/cuda_ipc/chain/run.h"
#include "comm/backends/cuda_ipc/chain/shared_segment.h"
#include "comm/backends/cuda_ipc/chain/step_kernel.cuh"
#include "comm/backends/cuda_ipc/queued_base.cuh"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"
#include "kernels/reduce.h"

namespace engine::comm {
namespace {

namespace ch = ipc::chain;
constexpr int K = ch::kEventSlots;
constexpr uint32_t kMagic = 0x4e484349;  // "ICHN"
constexpr Millis kHostGrace(2000);       // a call's GPU work: its timeout plus this
constexpr Millis kDrainWait(5000);       // the destructor's waits

// What a rank publishes under "<key>/chain/<rank>" (who it is: connect_ipc_peers checked).
struct Header {
  uint32_t magic;
  int32_t rank;
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

class EventChain final : public ipc::QueuedBase {
 public:
  EventChain(Store& store, int rank, int world, int device, const IpcRingOptions& opts);
  ~EventChain() override;
  void enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready) override;
  IpcProtocol protocol_for(int64_t) const override { return IpcProtocol::Events; }

 private:
  int left = 0, right = 0, sms = 1;
  IpcRingOptions opts;
  Store* store = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t own_ev[K] = {}, left_ev[K] = {}, right_ev[K] = {};  // right_ev == left_ev: W == 2
  std::unique_ptr<ch::SharedSegment> seg;
  float* buf = nullptr;       // [cap], this rank's; right maps it
  float* left_buf = nullptr;  // [cap], left's, mapped here
  int64_t cap = 0;
  uint64_t generation = 0;
  ch::ChainState st;

  // run.h's device operations on this rank's comm stream.
  struct Ops {
    EventChain& m;
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
  void open_events(const Header& l, const Header& r);
  void grow(int64_t count);
  BufInfo neighbour_buf(const std::string& prefix, int q, const char* role) const;
  void watch();
  void drain() override;
  void release() override;
};

Header EventChain::header() const {
  Header h;
  std::memset(&h, 0, sizeof h);
  h.magic = kMagic;
  h.rank = rank;
  for (int s = 0; s < K; ++s) CUDA_CHECK(cudaIpcGetEventHandle(&h.ev[s], own_ev[s]));
  return h;
}

// Publishes this rank's events, waits for every rank's and checks them.
std::vector<Header> EventChain::exchange(const Header& me) {
  std::vector<Header> all = ipc::exchange_headers(*store, opts.key + "/chain/", rank, world,
                                                  opts.timeout, me, at(), "IPC events");
  for (int q = 0; q < world; ++q)
    ENGINE_CHECK(all[q].magic == kMagic && all[q].rank == q, at(), ": rank ", q,
                 " published a header this build does not know");
  return all;
}

void EventChain::open_events(const Header& l, const Header& r) {
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

BufInfo EventChain::neighbour_buf(const std::string& prefix, int q, const char* role) const {
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
void EventChain::grow(int64_t count) {
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
    log(cudaFree(fresh), "cudaFree");
    throw;
  }
  if (left_buf) log(cudaIpcCloseMemHandle(left_buf), "cudaIpcCloseMemHandle");
  if (buf) log(cudaFree(buf), "cudaFree");
  buf = fresh;
  left_buf = static_cast<float*>(fresh_left);
  cap = new_cap;
  ++generation;
}

// Watches each call's event (comm/health/watchdog.h): GPU work that does not end within the
// timeout (a neighbour's step never ran) breaks the ring; the next call or check() throws.
void EventChain::watch() {
  Watchdog::Hooks h;
  h.async_error = [] { return std::string(); };
  h.describe = [this](const std::string& what, const std::string& why) {
    return detail::concat("ipc_ring (events) ", what, " on rank ", rank, " of ", world,
                          " (cuda:", device, ") ", why, " (timeout ", seconds_str(opts.timeout),
                          "; its steps wait on the GPU for rank ", left, " (left) and rank ", right,
                          " (right)); the ring is broken");
  };
  h.abort = [this] { std::fprintf(stderr, "engine: %s\n", watchdog->error().c_str()); };
  start_watchdog(std::move(h));
}

// Before freeing: this rank's queued steps end, and so does right's last step, which reads this
// rank's buffer (bounded; a step that never ends keeps the memory).
void EventChain::drain() {
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

void EventChain::release() {
  if (left_buf) log(cudaIpcCloseMemHandle(left_buf), "cudaIpcCloseMemHandle");
  if (buf) log(cudaFree(buf), "cudaFree");
  left_buf = buf = nullptr;
  for (int s = 0; s < K; ++s) {
    if (left_ev[s]) log(cudaEventDestroy(left_ev[s]), "cudaEventDestroy");
    if (right_ev[s] && right_ev[s] != left_ev[s])
      log(cudaEventDestroy(right_ev[s]), "cudaEventDestroy");
    if (own_ev[s]) log(cudaEventDestroy(own_ev[s]), "cudaEventDestroy");
    left_ev[s] = right_ev[s] = own_ev[s] = nullptr;
  }
  destroy_events();
  seg.reset();
}

EventChain::EventChain(Store& store, int rank, int world, int device, const IpcRingOptions& opts)
    : QueuedBase(rank, world, device, opts.timeout, "ipc_ring (events)"),
      left((rank - 1 + world) % world),
      right((rank + 1) % world),
      opts(opts),
      store(&store) {
  ENGINE_CHECK(world >= 2 && world <= ch::kMaxRanks, at(), ": the event chain takes 2 to ",
               ch::kMaxRanks, " ranks");
  cuda::DeviceGuard guard(device);
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  stream = cuda::comm_stream(device);
  try {
    for (int s = 0; s < K; ++s)
      CUDA_CHECK(
          cudaEventCreateWithFlags(&own_ev[s], cudaEventDisableTiming | cudaEventInterprocess));
    const std::vector<Header> all = exchange(header());
    seg =
        std::make_unique<ch::SharedSegment>(store, opts.key + "/chain", rank, world, opts.timeout);
    open_events(all[left], all[right]);
  } catch (...) {  // no destructor runs: free what is ours (nothing was queued)
    release();
    throw;
  }
  watch();
}

EventChain::~EventChain() {
  close();
}

void EventChain::enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready) {
  check();
  check_buffer(data);
  grow(count);
  cuda::comm_after(device, ready);
  Ops ops{*this, data, op};
  ch::CallSpec c;
  c.rank = rank;
  c.world = world;
  c.count = static_cast<size_t>(count);
  c.op = op;
  c.timeout = opts.timeout;
  ch::run_call(seg->shared(), ops, c, st);
  watch_call(
      stream, kHostGrace,
      detail::concat("all_reduce #", st.seq, " of ", count, " floats (", reduce_op_name(op), ")"));
}

}  // namespace

std::unique_ptr<QueuedRing> make_event_chain(Store& store, int rank, int world, int device,
                                             const IpcRingOptions& opts) {
  return std::make_unique<EventChain>(store, rank, world, device, opts);
}

}  // namespace engine::comm
