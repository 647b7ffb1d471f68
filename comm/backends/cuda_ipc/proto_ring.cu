// comm/backends/cuda_ipc/proto_ring.cu: the stream-ordered CUDA IPC ring, LL and Simple
// (make_proto_ring, queued_ring.h; docs/ring.md): one region per rank (protocol/layout.h)
// allocated and exchanged once at connect, every rank mapping every peer's; each all_reduce is one
// kernel (protocol/kernels.cuh) queued on the comm stream after the tensor is ready, with no host
// barrier, no pointer query after the first, no event creation and no host wait per call. The
// kernel checks the call words and bounds every wait; a failure lands in a host-mapped error record
// that the watchdog (queued_base.cuh) reads, naming the rank at fault within the timeout.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "comm/backends/cuda_ipc/protocol/call_state.h"
#include "comm/backends/cuda_ipc/protocol/describe.h"
#include "comm/backends/cuda_ipc/protocol/kernels.cuh"
#include "comm/backends/cuda_ipc/queued_base.cuh"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"
#include "kernels/reduce.h"

namespace engine::comm {
namespace {

namespace pr = ipc::proto;

constexpr Millis kHostGrace(2000);  // the kernel's own deadline fires first
constexpr Millis kStopWait(10000);  // an aborted kernel must end within this
constexpr int kLabels = 256;        // recent calls remembered for the error message

// What a rank publishes under "<key>/proto/<rank>" (who it is: connect_ipc_peers checked).
struct Header {
  int32_t device, protocol;
  int32_t channels, slots;
  int64_t slot_elems, ll_lines, ll_max_bytes;
  uint64_t bytes;
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

class ProtoRing final : public ipc::QueuedBase {
 public:
  ProtoRing(Store& store, int rank, int world, int device, const IpcRingOptions& opts);
  ~ProtoRing() override;
  void enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready) override;
  IpcProtocol protocol_for(int64_t count) const override {
    return pr::choose_protocol(protocol, count * 4, g);
  }

 private:
  std::string recorded_error() const override;
  Header header() const;
  void connect(Store& store);
  void check_peer(const Header& me, const Header& p, int q) const;
  void watch();
  void drain() override;
  void release() override;

  IpcRingOptions opts;
  pr::Geometry g;
  pr::Layout layout{};
  IpcProtocol protocol = IpcProtocol::Auto;
  char* own = nullptr;
  std::vector<char*> peers;        // [world]: own at [rank], the mapped regions elsewhere
  pr::ErrorRecord* err = nullptr;  // host-mapped
  pr::ErrorRecord* err_dev = nullptr;
  pr::CallState state;
  pr::CallLabel labels[kLabels];
};

Header ProtoRing::header() const {
  Header h;
  std::memset(&h, 0, sizeof h);
  h.device = device;
  h.protocol = static_cast<int32_t>(protocol);
  h.channels = g.channels;
  h.slots = g.slots;
  h.slot_elems = g.slot_elems;
  h.ll_lines = g.ll_lines;
  h.ll_max_bytes = g.ll_max_bytes;
  h.bytes = layout.bytes;
  CUDA_CHECK(cudaIpcGetMemHandle(&h.handle, own));
  return h;
}

void ProtoRing::check_peer(const Header& me, const Header& p, int q) const {
  const std::string at = detail::concat("ipc_ring (", ipc_protocol_name(protocol), ") on rank ",
                                        rank, " (cuda:", device, "): rank ", q, " ");
  ENGINE_CHECK(p.protocol == me.protocol, at, "runs protocol ",
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
void ProtoRing::connect(Store& store) {
  const Header me = header();
  const std::vector<Header> all = ipc::exchange_headers(
      store, opts.key + "/proto/", rank, world, opts.timeout, me,
      detail::concat("ipc_ring on rank ", rank, " (cuda:", device, ")"), "IPC region");
  peers.assign(world, nullptr);
  peers[rank] = own;
  for (int q = 0; q < world; ++q) {
    if (q == rank) continue;
    const Header& p = all[q];
    check_peer(me, p, q);
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
}

// The record's one-line message, or "".
std::string ProtoRing::recorded_error() const {
  const volatile pr::ErrorRecord* v = err;
  if (v->state != pr::kSet) return "";
  std::atomic_thread_fence(std::memory_order_acquire);
  pr::ErrorRecord copy;
  std::memcpy(&copy, const_cast<const pr::ErrorRecord*>(err), sizeof copy);
  pr::CallLabel label = labels[copy.seq % kLabels];
  return pr::describe_error(copy, label);
}

// The watchdog looks at the front call's event and at the error record every 2 ms while calls are
// queued; on a failure or a passed deadline it raises `abort` in the record, which makes every
// wait of the kernels give up.
void ProtoRing::watch() {
  Watchdog::Hooks h;
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
  start_watchdog(std::move(h));
}

// Before freeing: the queued calls end (or are aborted); a kernel that does not stop keeps its
// memory.
void ProtoRing::drain() {
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
      stuck = true;
      return;
    }
    std::this_thread::sleep_for(Millis(1));
  }
}

// The peers' mappings, the region and the error record (no kernel runs).
void ProtoRing::release() {
  for (int q = 0; q < static_cast<int>(peers.size()); ++q)
    if (q != rank && peers[q]) log(cudaIpcCloseMemHandle(peers[q]), "cudaIpcCloseMemHandle");
  peers.clear();
  if (own) log(cudaFree(own), "cudaFree");
  if (err) log(cudaFreeHost(err), "cudaFreeHost");
  own = nullptr;
  err = nullptr;
}

ProtoRing::ProtoRing(Store& store, int rank, int world, int device, const IpcRingOptions& opts)
    : QueuedBase(rank, world, device, opts.timeout, "ipc_ring"),
      opts(opts),
      protocol(opts.protocol) {
  ENGINE_CHECK(world <= pr::kMaxRanks, "ipc_ring on rank ", rank, ": ", world,
               " ranks, the stream-ordered protocols take at most ", pr::kMaxRanks);
  ENGINE_CHECK(protocol != IpcProtocol::Ll || world <= pr::kMaxLlRanks, "ipc_ring on rank ", rank,
               ": protocol ll is one hop to every peer, for at most ", pr::kMaxLlRanks, " ranks; ",
               world, " ranks: use simple or auto");
  cuda::DeviceGuard guard(device);
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  g = geometry_of(opts, world, sms);
  layout = pr::region_layout(g);
  CUDA_CHECK(
      cudaHostAlloc(reinterpret_cast<void**>(&err), sizeof(pr::ErrorRecord), cudaHostAllocMapped));
  std::memset(static_cast<void*>(err), 0, sizeof(pr::ErrorRecord));
  try {
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&err_dev), err, 0));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&own), layout.bytes));
    CUDA_CHECK(cudaMemset(own, 0, layout.bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
    connect(store);
  } catch (...) {  // no destructor runs: free what is ours (no kernel has run)
    release();
    throw;
  }
  watch();
}

ProtoRing::~ProtoRing() {
  close();
}

void ProtoRing::enqueue(float* data, int64_t count, ReduceOp op, const cuda::Event* ready) {
  check();
  check_buffer(data);
  const IpcProtocol p = protocol_for(count);
  auto a = std::make_unique<pr::CallArgs>();
  a->rank = rank;
  a->g = g;
  a->layout = layout;
  a->timeout_ns = static_cast<uint64_t>(opts.timeout.count()) * 1000000ull;
  a->err = err_dev;
  for (int q = 0; q < world; ++q) a->regions[q] = peers[q];
  pr::next_call(state, *a, p, data, count, static_cast<uint32_t>(op),
                static_cast<uint32_t>(DType::F32), op == ReduceOp::Avg);
  labels[a->seq % kLabels] = pr::CallLabel{rank,
                                           world,
                                           device,
                                           static_cast<uint64_t>(count),
                                           reduce_op_name(op),
                                           ipc_protocol_name(p),
                                           opts.timeout};
  cudaStream_t s = cuda::comm_stream(device);
  cuda::comm_after(device, ready);
  launch_op(p, *a, op, s);
  watch_call(s, kHostGrace,
             detail::concat("all_reduce #", a->seq, " of ", count, " floats (",
                            ipc_protocol_name(p), ")"));
}

}  // namespace

std::unique_ptr<QueuedRing> make_proto_ring(Store& store, int rank, int world, int device,
                                            const IpcRingOptions& opts) {
  return std::make_unique<ProtoRing>(store, rank, world, device, opts);
}

}  // namespace engine::comm
