// comm/backends/cuda_ipc/queued_base.cu: the pieces both QueuedRing implementations share
// (queued_base.cuh) and connect_ipc_peers (queued_ring.h), the check of who the peers are and the
// mode, made before either implementation allocates.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "comm/backends/cuda_ipc/host_probe.cuh"
#include "comm/backends/cuda_ipc/queued_base.cuh"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"

namespace engine::comm {

namespace ipc {

std::vector<std::string> exchange_all(Store& store, const std::string& prefix, int rank, int world,
                                      Millis timeout, const std::string& mine,
                                      const std::string& at, const char* what) {
  store.set(prefix + std::to_string(rank), mine);
  std::vector<std::string> keys;
  for (int q = 0; q < world; ++q) keys.push_back(prefix + std::to_string(q));
  try {
    store.wait(keys, timeout);
  } catch (const TimeoutError& e) {
    int missing = 0;
    while (missing < world && store.check({keys[missing]})) ++missing;
    throw TimeoutError(detail::concat(at, ": rank ", missing, " did not publish its ", what,
                                      " within ", seconds_str(timeout), ": ", e.what()));
  }
  std::vector<std::string> all(world);
  for (int q = 0; q < world; ++q) {
    all[q] = q == rank ? mine : store.get(keys[q]);
    ENGINE_CHECK(all[q].size() == mine.size(), at, ": store key '", keys[q], "' holds ",
                 all[q].size(), " bytes, expected ", mine.size());
  }
  return all;
}

void log_failure(cudaError_t e, const char* what, const char* tag, int rank) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  std::fprintf(stderr, "engine: %s of rank %d: %s failed: %s\n", tag, rank, what,
               cudaGetErrorString(e));
}

QueuedBase::QueuedBase(int rank, int world, int device, Millis timeout, const char* tag)
    : rank(rank), world(world), device(device), timeout(timeout), tag(tag) {}

// The derived ring has stopped the watchdog unless its destructor failed first; then its probes
// still hand their events back into the pool, which lives until this body ends.
QueuedBase::~QueuedBase() {
  watchdog.reset();
}

void QueuedBase::close() {
  try {
    cuda::DeviceGuard guard(device);
    drain();
    stop_watchdog();  // its probes hand their events back
    if (stuck) {
      std::fprintf(stderr,
                   "engine: %s of rank %d: queued work did not end; its memory is left "
                   "allocated\n",
                   tag, rank);
      return;
    }
    release();
    destroy_events();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine: %s of rank %d: %s\n", tag, rank, e.what());
  }
}

void QueuedBase::compute_waits_last() {
  if (last) CUDA_CHECK(cudaStreamWaitEvent(cuda::compute_stream(device), last, 0));
}

void QueuedBase::check() const {
  const std::string rec = recorded_error();
  if (!rec.empty()) throw TimeoutError(rec);
  const std::string e = watchdog ? watchdog->error() : "";
  if (e.empty()) return;
  if (watchdog->timed_out()) throw TimeoutError(e);
  throw Error(e);
}

void QueuedBase::check_buffer(const void* data) {
  if (checked_.count(data)) return;
  cudaPointerAttributes attr;
  CUDA_CHECK(cudaPointerGetAttributes(&attr, data));
  ENGINE_CHECK((attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
                   attr.device == device,
               "ipc_ring all_reduce on rank ", rank, ": the buffer is not memory of cuda:", device);
  if (checked_.size() > 4096) checked_.clear();
  checked_.insert(data);
}

cudaEvent_t QueuedBase::take_event() {
  {
    std::lock_guard<std::mutex> lk(pool_mu_);
    if (!pool_.empty()) {
      cudaEvent_t e = pool_.back();
      pool_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;  // the pool grows to the calls in flight, once
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void QueuedBase::give_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lk(pool_mu_);
  pool_.push_back(e);
}

void QueuedBase::start_watchdog(Watchdog::Hooks h) {
  h.on_start = [this] {
    try {
      cuda::set_thread_device(device);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "engine: %s watchdog of rank %d: %s\n", tag, rank, e.what());
    }
  };
  watchdog = std::make_unique<Watchdog>(std::move(h), Millis(2));
}

void QueuedBase::watch_call(cudaStream_t s, Millis grace, const std::string& what) {
  cudaEvent_t ev = take_event();
  CUDA_CHECK(cudaEventRecord(ev, s));
  last = ev;
  watchdog->watch(std::make_unique<PooledProbe>(ev, [this](cudaEvent_t e) { give_event(e); }),
                  Deadline::after(timeout + grace), what);
}

void QueuedBase::stop_watchdog() {
  watchdog.reset();
}

void QueuedBase::destroy_events() {
  for (cudaEvent_t e : pool_) log(cudaEventDestroy(e), "cudaEventDestroy");
  pool_.clear();
}

namespace {

constexpr uint32_t kMagic = 0x52455049;  // "IPER"
constexpr uint32_t kVersion = 1;

// What a rank publishes under "<key>/peer/<rank>".
struct PeerHeader {
  uint32_t magic, version;
  int32_t world, rank, device, mps;
  int64_t pid;
  char host[64];
  char boot_id[40];
  char gpu_uuid[16];
};
static_assert(std::is_trivially_copyable_v<PeerHeader>);

PeerHeader this_peer(int rank, int world, int device) {
  PeerHeader h;
  std::memset(&h, 0, sizeof h);
  h.magic = kMagic;
  h.version = kVersion;
  h.world = world;
  h.rank = rank;
  h.device = device;
  h.mps = mps_daemon_running() ? 1 : 0;
  h.pid = static_cast<int64_t>(getpid());
  if (gethostname(h.host, sizeof h.host - 1) != 0) h.host[0] = '?';
  const std::string boot = read_line("/proc/sys/kernel/random/boot_id");
  std::memcpy(h.boot_id, boot.data(), std::min(boot.size(), sizeof h.boot_id - 1));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::memcpy(h.gpu_uuid, prop.uuid.bytes, sizeof h.gpu_uuid);
  return h;
}

void check_peer(const PeerHeader& me, const PeerHeader& p, int q, const std::string& at) {
  const std::string who = detail::concat(at, ": rank ", q, " ");
  ENGINE_CHECK(p.magic == kMagic && p.version == kVersion, who,
               "published a header this build does not know");
  ENGINE_CHECK(p.world == me.world && p.rank == q, who, "says it is rank ", p.rank, " of ",
               p.world);
  const std::string pb = str_of(p.boot_id, sizeof p.boot_id),
                    mb = str_of(me.boot_id, sizeof me.boot_id);
  const std::string ph = str_of(p.host, sizeof p.host), mh = str_of(me.host, sizeof me.host);
  // One machine: the same kernel boot (containers of one host share it), else the same name.
  ENGINE_CHECK(!pb.empty() && !mb.empty() ? pb == mb : ph == mh, who, "runs on host '", ph,
               "' and this rank on '", mh, "': CUDA IPC needs one host");
  ENGINE_CHECK(p.pid != me.pid, who, "runs in this process: CUDA IPC needs one process per rank");
}

}  // namespace

}  // namespace ipc

std::string connect_ipc_peers(Store& store, int rank, int world, int device,
                              const IpcRingOptions& opts) {
  cuda::DeviceGuard guard(device);
  const ipc::PeerHeader me = ipc::this_peer(rank, world, device);
  const std::string at = detail::concat("ipc_ring on rank ", rank, " (cuda:", device, ")");
  const std::vector<ipc::PeerHeader> all = ipc::exchange_headers(
      store, opts.key + "/peer/", rank, world, opts.timeout, me, at, "IPC ring header");
  bool shared = false, all_mps = me.mps != 0;
  for (int q = 0; q < world; ++q) {
    if (q == rank) continue;
    ipc::check_peer(me, all[q], q, at);
    shared = shared || std::memcmp(all[q].gpu_uuid, me.gpu_uuid, sizeof me.gpu_uuid) == 0;
    all_mps = all_mps && all[q].mps != 0;
  }
  return shared && !all_mps ? "time-sliced" : "concurrent";
}

}  // namespace engine::comm
