// comm/backends/cuda_ipc/proto_ring.cu: the stream-ordered CUDA IPC ring (proto_ring.h): connect
// (regions, IPC handles through the store, every peer opened), the mode (concurrent or
// time-sliced), the per-call launch, and the watchdog that reads the error record.
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

#include "comm/backends/cuda_ipc/host_probe.cuh"
#include "comm/backends/cuda_ipc/proto_ring.h"
#include "comm/backends/cuda_ipc/protocol/call_state.h"
#include "comm/backends/cuda_ipc/protocol/describe.h"
#include "comm/backends/cuda_ipc/protocol/kernels.cuh"
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

namespace pr = ipc::proto;

constexpr uint32_t kMagic = 0x50435049;  // "IPCP"
constexpr uint32_t kVersion = 1;
constexpr Millis kHostGrace(2000);  // the kernel's own deadline fires first
constexpr Millis kStopWait(10000);  // an aborted kernel must end within this
constexpr int kLabels = 256;        // recent calls remembered for the error message

// What a rank publishes under "<key>/proto/<rank>".
struct Header {
  uint32_t magic, version;
  int32_t world, rank, device, protocol, mps;
  int32_t channels, slots;
  int64_t pid, slot_elems, ll_lines, ll_max_bytes;
  uint64_t bytes;
  char host[64];
  char boot_id[40];
  char gpu_uuid[16];
  cudaIpcMemHandle_t handle;
};
static_assert(std::is_trivially_copyable_v<Header>);

pr::Geometry geometry_of(const IpcRingOptions& o, int world, int sms) {
  pr::Geometry g;
  g.world = world;
  g.channels = std::clamp(o.channels, 1, std::max(1, std::min(pr::kMaxChannels, sms / 2)));
  g.slots = std::max(2, o.slots);
  g.slot_elems = std::max<int64_t>(4, static_cast<int64_t>(o.slot_bytes / 16) * 4);
  g.ll_max_bytes = static_cast<int64_t>(o.ll_max_bytes);
  g.ll_lines = std::max<int64_t>(256, static_cast<int64_t>(o.ll_max_bytes / 4));
  return g;
}

void log_failure(cudaError_t e, const char* what, int rank) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  std::fprintf(stderr, "engine: ipc_ring of rank %d: %s failed: %s\n", rank, what,
               cudaGetErrorString(e));
}

template <class Op>
void launch(pr::Protocol p, const pr::CallArgs& a, Op op, cudaStream_t s) {
  if (p == pr::Protocol::Ll)
    pr::ll_kernel<<<pr::kLlBlocks, pr::kThreads, 0, s>>>(a, op);
  else
    pr::simple_kernel<<<a.g.channels, pr::kThreads, 0, s>>>(a, op);
  CUDA_CHECK_LAUNCH();
}

void launch_op(pr::Protocol p, const pr::CallArgs& a, ReduceOp op, cudaStream_t s) {
  switch (op) {
    case ReduceOp::Prod:
      return launch(p, a, kernels::ProdOp{}, s);
    case ReduceOp::Max:
      return launch(p, a, kernels::MaxOp{}, s);
    case ReduceOp::Min:
      return launch(p, a, kernels::MinOp{}, s);
    default:  // Sum, and Avg: a sum divided by W where it is final
      return launch(p, a, kernels::SumOp{}, s);
  }
}

}  // namespace

struct ProtoRing::Impl {
  int rank = 0, world = 1, device = 0;
  IpcRingOptions opts;
  pr::Geometry g;
  pr::Layout layout{};
  IpcProtocol protocol = IpcProtocol::Auto;
  std::string mode;
  char* own = nullptr;
  std::vector<char*> peers;        // [world]: own at [rank], the mapped regions elsewhere
  pr::ErrorRecord* err = nullptr;  // host-mapped
  pr::ErrorRecord* err_dev = nullptr;
  pr::CallState state;
  pr::CallLabel labels[kLabels];
  // Pooled events: one per queued call, back in the pool once the watchdog saw it end.
  std::mutex pool_mu;
  std::vector<cudaEvent_t> pool;
  cudaEvent_t last = nullptr;  // the last queued call's (owned by its probe until it ends)
  bool kernel_stuck = false;
  std::unique_ptr<Watchdog> watchdog;
  std::unordered_set<const void*> checked;  // buffers found to be memory of `device`

  Header header(const std::string& host, const std::string& boot, const char* uuid) const;
  void connect(Store& store, const std::string& host, const std::string& boot, const char* uuid);
  void check_peer(const Header& me, const Header& p, int q) const;
  cudaEvent_t take_event();
  void give_event(cudaEvent_t e);
  std::string recorded_error() const;
  void start_watchdog();
  void drain();
};

Header ProtoRing::Impl::header(const std::string& host, const std::string& boot,
                               const char* uuid) const {
  Header h;
  std::memset(&h, 0, sizeof h);
  h.magic = kMagic;
  h.version = kVersion;
  h.world = world;
  h.rank = rank;
  h.device = device;
  h.protocol = static_cast<int32_t>(protocol);
  h.mps = mps_daemon_running() ? 1 : 0;
  h.channels = g.channels;
  h.slots = g.slots;
  h.pid = static_cast<int64_t>(getpid());
  h.slot_elems = g.slot_elems;
  h.ll_lines = g.ll_lines;
  h.ll_max_bytes = g.ll_max_bytes;
  h.bytes = layout.bytes;
  std::memcpy(h.host, host.data(), std::min(host.size(), sizeof h.host - 1));
  std::memcpy(h.boot_id, boot.data(), std::min(boot.size(), sizeof h.boot_id - 1));
  std::memcpy(h.gpu_uuid, uuid, sizeof h.gpu_uuid);
  CUDA_CHECK(cudaIpcGetMemHandle(&h.handle, own));
  return h;
}

void ProtoRing::Impl::check_peer(const Header& me, const Header& p, int q) const {
  const std::string at = detail::concat("ipc_ring (", ipc_protocol_name(protocol), ") on rank ",
                                        rank, " (cuda:", device, "): rank ", q, " ");
  ENGINE_CHECK(p.magic == kMagic && p.version == kVersion, at,
               "published a header this build does not know");
  ENGINE_CHECK(p.world == world && p.rank == q, at, "says it is rank ", p.rank, " of ", p.world);
  const std::string pb = str_of(p.boot_id, sizeof p.boot_id),
                    mb = str_of(me.boot_id, sizeof me.boot_id);
  const std::string ph = str_of(p.host, sizeof p.host), mh = str_of(me.host, sizeof me.host);
  ENGINE_CHECK(!pb.empty() && !mb.empty() ? pb == mb : ph == mh, at, "runs on host '", ph,
               "' and this rank on '", mh, "': CUDA IPC needs one host");
  ENGINE_CHECK(p.pid != me.pid, at, "runs in this process: CUDA IPC needs one process per rank");
  ENGINE_CHECK(p.protocol == me.protocol, at, "runs --cuda-ring-protocol ",
               ipc_protocol_name(static_cast<IpcProtocol>(p.protocol)), " and this rank ",
               ipc_protocol_name(protocol), ": every rank must choose the same");
  ENGINE_CHECK(p.channels == me.channels && p.slots == me.slots && p.slot_elems == me.slot_elems &&
                   p.ll_lines == me.ll_lines && p.ll_max_bytes == me.ll_max_bytes &&
                   p.bytes == me.bytes,
               at, "sized its region for ", p.channels, " channels of ", p.slots, " slots of ",
               p.slot_elems * 4, " bytes and this rank for ", me.channels, " of ", me.slots, " of ",
               me.slot_elems * 4,
               " (GPUs with another SM count? every rank must pass the "
               "same options)");
}

// Publishes this rank's region, waits for every peer's, checks and opens them.
void ProtoRing::Impl::connect(Store& store, const std::string& host, const std::string& boot,
                              const char* uuid) {
  const std::string prefix = opts.key + "/proto/";
  const Header me = header(host, boot, uuid);
  store.set(prefix + std::to_string(rank),
            std::string(reinterpret_cast<const char*>(&me), sizeof me));
  std::vector<std::string> keys;
  for (int q = 0; q < world; ++q) keys.push_back(prefix + std::to_string(q));
  try {
    store.wait(keys, opts.timeout);
  } catch (const TimeoutError& e) {
    int missing = 0;
    while (missing < world && store.check({keys[missing]})) ++missing;
    throw TimeoutError(detail::concat("ipc_ring on rank ", rank, " (cuda:", device, "): rank ",
                                      missing, " did not publish its IPC region within ",
                                      seconds_str(opts.timeout), ": ", e.what()));
  }
  bool shared = false, all_mps = me.mps != 0;
  peers.assign(world, nullptr);
  peers[rank] = own;
  for (int q = 0; q < world; ++q) {
    if (q == rank) continue;
    const std::string v = store.get(keys[q]);
    ENGINE_CHECK(v.size() == sizeof(Header), "ipc_ring on rank ", rank, ": store key '", keys[q],
                 "' holds ", v.size(), " bytes, expected ", sizeof(Header));
    Header p;
    std::memcpy(&p, v.data(), sizeof p);
    check_peer(me, p, q);
    shared = shared || std::memcmp(p.gpu_uuid, uuid, sizeof p.gpu_uuid) == 0;
    all_mps = all_mps && p.mps != 0;
    void* m = nullptr;
    const cudaError_t e = cudaIpcOpenMemHandle(&m, p.handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      ENGINE_FAIL("ipc_ring on rank ", rank, " (cuda:", device,
                  "): cudaIpcOpenMemHandle of the region of rank ", q, " (its cuda:", p.device,
                  ") failed: ", cudaGetErrorString(e));
    }
    peers[q] = static_cast<char*>(m);
  }
  mode = shared && !all_mps ? "time-sliced" : "concurrent";
}

cudaEvent_t ProtoRing::Impl::take_event() {
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

void ProtoRing::Impl::give_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lk(pool_mu);
  pool.push_back(e);
}

// The record's one-line message, or "".
std::string ProtoRing::Impl::recorded_error() const {
  const volatile pr::ErrorRecord* v = err;
  if (v->state != pr::kSet) return "";
  std::atomic_thread_fence(std::memory_order_acquire);
  pr::ErrorRecord copy;
  std::memcpy(&copy, const_cast<const pr::ErrorRecord*>(err), sizeof copy);
  pr::CallLabel label = labels[copy.seq % kLabels];
  return pr::describe_error(copy, label);
}

// The watchdog (comm/health/watchdog.h): looks at the front call's event and at the error record
// every 2 ms while calls are queued; on a failure or a passed deadline it raises `abort` in the
// record, which makes every wait of the kernels give up.
void ProtoRing::Impl::start_watchdog() {
  Watchdog::Hooks h;
  h.on_start = [this] {
    try {
      cuda::set_thread_device(device);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "engine: ipc_ring watchdog of rank %d: %s\n", rank, e.what());
    }
  };
  h.async_error = [this]() -> std::string {
    const std::string e = recorded_error();
    return e.empty() ? e : "failed: " + e;
  };
  h.describe = [this](const std::string& what, const std::string& why) {
    const std::string e = recorded_error();
    if (!e.empty()) return e;
    return detail::concat("ipc_ring ", what, " on rank ", rank, " of ", world, " (cuda:", device,
                          ") ", why, " (timeout ", seconds_str(opts.timeout),
                          "); the ring is broken");
  };
  h.abort = [this] {
    static_cast<volatile pr::ErrorRecord*>(err)->abort = 1;
    std::fprintf(stderr, "engine: %s\n", watchdog->error().c_str());
  };
  watchdog = std::make_unique<Watchdog>(std::move(h), Millis(2));
}

// Before freeing: the queued calls end (or are aborted); a kernel that does not stop keeps its
// memory.
void ProtoRing::Impl::drain() {
  if (!last) return;
  const Deadline deadline = Deadline::after(opts.timeout + kHostGrace);
  bool aborted = false;
  Clock::time_point abort_at{};
  for (;;) {
    const cudaError_t q = cudaEventQuery(last);
    if (q != cudaErrorNotReady) return;
    if (!aborted && (deadline.expired() || err->state == pr::kSet)) {
      static_cast<volatile pr::ErrorRecord*>(err)->abort = 1;
      aborted = true;
      abort_at = Clock::now();
    }
    if (aborted && Clock::now() - abort_at > kStopWait) {
      kernel_stuck = true;
      return;
    }
    std::this_thread::sleep_for(Millis(1));
  }
}

ProtoRing::ProtoRing(Store& store, int rank, int world, int device, const IpcRingOptions& opts)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.rank = rank;
  m.world = world;
  m.device = device;
  m.opts = opts;
  m.protocol = opts.protocol;
  ENGINE_CHECK(world <= pr::kMaxRanks, "ipc_ring on rank ", rank, ": ", world,
               " ranks, the stream-ordered protocols take at most ", pr::kMaxRanks);
  ENGINE_CHECK(opts.protocol != IpcProtocol::Ll || world <= pr::kMaxLlRanks, "ipc_ring on rank ",
               rank,
               ": --cuda-ring-protocol ll is one hop to every peer, for "
               "at most ",
               pr::kMaxLlRanks, " ranks; ", world, " ranks: use simple or auto");
  cuda::DeviceGuard guard(device);
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  m.g = geometry_of(opts, world, sms);
  m.layout = pr::region_layout(m.g);
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.err), sizeof(pr::ErrorRecord),
                           cudaHostAllocMapped));
  std::memset(static_cast<void*>(m.err), 0, sizeof(pr::ErrorRecord));
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.err_dev), m.err, 0));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m.own), m.layout.bytes));
  CUDA_CHECK(cudaMemset(m.own, 0, m.layout.bytes));
  CUDA_CHECK(cudaDeviceSynchronize());
  char host[64] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  try {
    m.connect(store, host, read_line("/proc/sys/kernel/random/boot_id"), prop.uuid.bytes);
  } catch (...) {  // no destructor runs: free what is ours (no kernel has run)
    for (int q = 0; q < static_cast<int>(m.peers.size()); ++q)
      if (q != rank && m.peers[q])
        log_failure(cudaIpcCloseMemHandle(m.peers[q]), "cudaIpcCloseMemHandle", rank);
    log_failure(cudaFree(m.own), "cudaFree", rank);
    log_failure(cudaFreeHost(m.err), "cudaFreeHost", rank);
    throw;
  }
  m.start_watchdog();
}

ProtoRing::~ProtoRing() {
  Impl& m = *impl_;
  try {
    cuda::DeviceGuard guard(m.device);
    m.drain();
    m.watchdog.reset();  // its probes hand their events back
    if (m.kernel_stuck) {
      std::fprintf(stderr,
                   "engine: ipc_ring of rank %d: a kernel did not stop after its abort; "
                   "its memory is left allocated\n",
                   m.rank);
      return;
    }
    for (int q = 0; q < m.world; ++q)
      if (q != m.rank && m.peers.size() > static_cast<size_t>(q) && m.peers[q])
        log_failure(cudaIpcCloseMemHandle(m.peers[q]), "cudaIpcCloseMemHandle", m.rank);
    if (m.own) log_failure(cudaFree(m.own), "cudaFree", m.rank);
    if (m.err) log_failure(cudaFreeHost(m.err), "cudaFreeHost", m.rank);
    for (cudaEvent_t e : m.pool) log_failure(cudaEventDestroy(e), "cudaEventDestroy", m.rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine: ipc_ring of rank %d: %s\n", m.rank, e.what());
  }
}

IpcProtocol ProtoRing::protocol_for(int64_t count) const {
  return pr::choose_protocol(impl_->protocol, count * 4, impl_->g);
}

const std::string& ProtoRing::mode() const {
  return impl_->mode;
}

void ProtoRing::check() const {
  const std::string rec = impl_->recorded_error();
  if (!rec.empty()) throw TimeoutError(rec);
  const std::string e = impl_->watchdog ? impl_->watchdog->error() : "";
  if (e.empty()) return;
  if (impl_->watchdog->timed_out()) throw TimeoutError(e);
  throw Error(e);
}

void ProtoRing::enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready) {
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
  const IpcProtocol p = protocol_for(count);
  auto a = std::make_unique<pr::CallArgs>();
  a->rank = m.rank;
  a->g = m.g;
  a->layout = m.layout;
  a->timeout_ns = static_cast<uint64_t>(m.opts.timeout.count()) * 1000000ull;
  a->err = m.err_dev;
  for (int q = 0; q < m.world; ++q) a->regions[q] = m.peers[q];
  pr::next_call(m.state, *a, p, data, count, static_cast<uint32_t>(op),
                static_cast<uint32_t>(DType::F32), op == ReduceOp::Avg);
  m.labels[a->seq % kLabels] = pr::CallLabel{m.rank,
                                             m.world,
                                             m.device,
                                             static_cast<uint64_t>(count),
                                             reduce_op_name(op),
                                             ipc_protocol_name(p),
                                             m.opts.timeout};
  cudaStream_t s = cuda::comm_stream(m.device);
  cuda::comm_after(m.device, ready);
  launch_op(p, *a, op, s);
  cudaEvent_t ev = m.take_event();
  CUDA_CHECK(cudaEventRecord(ev, s));
  m.last = ev;
  Impl* im = &m;
  m.watchdog->watch(std::make_unique<PooledProbe>(ev, [im](cudaEvent_t e) { im->give_event(e); }),
                    Deadline::after(m.opts.timeout + kHostGrace),
                    detail::concat("all_reduce #", a->seq, " of ", count, " floats (",
                                   ipc_protocol_name(p), ")"));
}

void ProtoRing::compute_waits_last() {
  if (impl_->last)
    CUDA_CHECK(cudaStreamWaitEvent(cuda::compute_stream(impl_->device), impl_->last, 0));
}

}  // namespace engine::comm
