// comm/health/blame.h: who stopped making progress. When a wait times out or a peer is lost, the
// Transport asks its Blamer (once); the Blamer checks every peer's health endpoint at once
// (comm/health/health.h) and judges from what the ranks know, not from which neighbour this rank
// waited on:
//   gone            the connection was refused or reset, or (same host) the process has exited;
//   frozen          the kernel accepted the connection but the process did not answer
//                   (same host: /proc says it is stopped, as by SIGSTOP);
//   unreachable     the connect timed out (a network cut, packets dropped);
//   not progressing it answered, is in no collective, and has not started the one the others
//                   wait in (its last completed collective is older).
// A rank that finds every peer unreachable says that it is the one cut off. The first rank to
// reach a verdict tells it to every rank that answered before it aborts, so that every survivor
// reports the same ranks even after that rank has exited; a rank that was told a verdict uses it.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/base/store.h"
#include "comm/health/health.h"

namespace engine::comm {

class Transport;

class Blamer {
 public:
  // peers: every rank's health address (this rank's too); probe: how long a check may take.
  Blamer(int rank, std::vector<HealthAddress> peers, uint64_t nonce,
         std::shared_ptr<HealthServer> server, Millis probe);
  // "rank 2 is frozen (...)", several joined by "; ", or "" when no rank can be blamed (every
  // rank answered and is inside a collective). Computed once; later calls return the same.
  std::string verdict();

 private:
  std::string judge(const std::vector<Probe>& probes, const std::vector<ProcState>& procs) const;
  std::string told() const;

  int rank_;
  std::vector<HealthAddress> peers_;
  uint64_t nonce_;
  std::shared_ptr<HealthServer> server_;
  Millis probe_;
  std::mutex mu_;
  bool done_ = false;
  std::string verdict_;
};

// The ranks a verdict (or an error carrying one) names as gone, frozen or unreachable, ascending
// and once each. Not those "alive but not progressing" (a rank that left a failed collective to
// regroup looks so), and a rank that says it is cut off names nobody.
std::vector<int> blamed_ranks(const std::string& text);

// How long a health check may take for a communicator with this timeout: half of it, at least
// 0.5 s and at most 2 s.
Millis probe_timeout(Millis timeout);

// Rendezvous steps (comm/rendezvous/rendezvous.cpp). Before the ranks gather: starts this rank's
// health endpoint on `bind` (the data port's address; "0.0.0.0" = every interface) and publishes it
// as addr:port under `prefix`health/<rank>.
std::shared_ptr<HealthServer> publish_health(Store& store, const std::string& prefix, int rank,
                                             const std::string& addr, const std::string& bind);
// Once the transport exists: reads every rank's health address and gives the transport a Blamer
// and the endpoint's progress counters.
void attach_blamer(Transport& t, Store& store, const std::string& prefix,
                   std::shared_ptr<HealthServer> server, uint64_t nonce, Millis timeout,
                   Deadline deadline);

}  // namespace engine::comm
