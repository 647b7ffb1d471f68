// comm/backends/cuda_ipc/queued_base.cuh: what the two QueuedRing implementations (proto_ring.cu,
// chain/event_chain.cu) share, written once (queued_base.cu): the exchange of fixed-size headers
// through the store, and a base class with the per-call pieces: the device-pointer check, the
// pool of events that mark the queued calls, the watchdog that sees them end and its error as an
// exception. CUDA translation units only.
#pragma once
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "comm/backends/cuda_ipc/queued_ring.h"
#include "comm/health/watchdog.h"
#include "core/error.h"

namespace engine::comm::ipc {

// Sets `mine` under "<prefix><rank>" and returns every rank's value (its own included), each
// checked to be mine.size() bytes long. `at` starts the messages ("ipc_ring on rank 0 (cuda:0)");
// a rank that does not publish its `what` within `timeout` is named in a TimeoutError.
std::vector<std::string> exchange_all(Store& store, const std::string& prefix, int rank, int world,
                                      Millis timeout, const std::string& mine,
                                      const std::string& at, const char* what);

// exchange_all of a trivially copyable header.
template <class H>
std::vector<H> exchange_headers(Store& store, const std::string& prefix, int rank, int world,
                                Millis timeout, const H& me, const std::string& at,
                                const char* what) {
  static_assert(std::is_trivially_copyable_v<H>);
  const std::vector<std::string> v =
      exchange_all(store, prefix, rank, world, timeout,
                   std::string(reinterpret_cast<const char*>(&me), sizeof me), at, what);
  std::vector<H> all(v.size());
  for (size_t q = 0; q < v.size(); ++q) std::memcpy(&all[q], v[q].data(), sizeof(H));
  return all;
}

// Logs a failed CUDA call of a path that must not throw; `tag` names the ring ("ipc_ring").
void log_failure(cudaError_t e, const char* what, const char* tag, int rank);

// The calls of one rank's ring in flight on its comm stream.
class QueuedBase : public QueuedRing {
 public:
  void compute_waits_last() override;
  void check() const override;

 protected:
  // tag: "ipc_ring" or "ipc_ring (events)", the start of this ring's log lines.
  QueuedBase(int rank, int world, int device, Millis timeout, const char* tag);
  ~QueuedBase() override;
  // A failure the device recorded, described ("" if none): check() throws it first.
  virtual std::string recorded_error() const { return ""; }
  // Waits (bounded) for the queued work to end; sets `stuck` when it does not.
  virtual void drain() = 0;
  // Frees what the ring holds on the device and host (no queued work runs any more).
  virtual void release() = 0;
  // What a derived destructor calls: drain, stop the watchdog, then release unless stuck; logs
  // failures, never throws.
  void close();
  // Throws unless `data` is memory of this rank's GPU (asked of the driver once per buffer).
  void check_buffer(const void* data);
  cudaEvent_t take_event();
  void give_event(cudaEvent_t e);
  // Starts the watchdog (its thread makes `device` current first; on_start is set here).
  void start_watchdog(Watchdog::Hooks h);
  // Records a pooled event on `s` after the call just queued there and has the watchdog watch it
  // for the timeout plus `grace`; `what` names the call in its message.
  void watch_call(cudaStream_t s, Millis grace, const std::string& what);
  // Stops the watchdog (its probes hand their events back), then destroys the pooled events.
  void stop_watchdog();
  void destroy_events();
  void log(cudaError_t e, const char* what) const { log_failure(e, what, tag, rank); }

  int rank, world, device;
  Millis timeout;
  const char* tag;
  cudaEvent_t last = nullptr;  // the last queued call's (owned by its probe until it ends)
  bool stuck = false;          // queued work did not end: leak rather than free under it
  std::unique_ptr<Watchdog> watchdog;

 private:
  std::mutex pool_mu_;
  std::vector<cudaEvent_t> pool_;
  std::unordered_set<const void*> checked_;  // buffers found to be memory of `device`
};

}  // namespace engine::comm::ipc
