// comm/health/health.h: a side channel that survives a stalled data path. Every rank of a job runs
// a small health endpoint on its own socket and thread; peers ask it how far the rank has got (its
// Progress counters) and tell it a verdict they reached about who stopped (comm/health/blame.h).
//
// What a check tells about a peer that does not answer: the connection refused or reset means its
// process is gone; a connection the kernel accepted but nobody answered means the process is alive
// but frozen (SIGSTOP, a debugger, a hung machine with a live kernel); a connect that times out
// means it cannot be reached (network cut, dropped packets). On the same host the peer's
// /proc/<pid>/stat (its start time checked against the one it published) tells stopped from gone.
//
// Requests: 24 bytes {magic "ENGK", kind (1 query, 2 verdict), the job's nonce, from, length} and,
// for a verdict, `length` bytes of text (at most 4 KiB). The answer: 32 bytes {magic, rank, pid,
// started, completed}. Strangers (another magic or nonce) are closed on without an answer; every
// read has a 250 ms deadline.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/base/deadline.h"
#include "comm/base/progress.h"
#include "comm/transport/socket.h"

namespace engine::comm {

// Where a rank's health endpoint listens and which process it is (published at rendezvous).
struct HealthAddress {
  std::string host;
  int port = 0;
  int pid = 0;
  uint64_t start_time = 0;  // field 22 of /proc/<pid>/stat: tells a reused pid apart
  std::string boot_id;      // boot id and pid namespace: where equal, /proc shows the pid
};
// This process, its endpoint at host:port.
HealthAddress self_health_address(const std::string& host, int port);
std::string encode_health(const HealthAddress& a);
// Throws engine::Error naming the rank on a malformed entry.
HealthAddress decode_health(const std::string& s, int rank);

// What a local process looks like in /proc: Running (R, S, D...), Stopped (T, t), Gone (no entry,
// a zombie, or another process under the same pid), Unknown (another host).
enum class ProcState { Unknown, Running, Stopped, Gone };
ProcState local_process_state(const HealthAddress& a);

struct HealthReply {
  int rank = -1;
  int pid = 0;
  uint64_t started = 0, completed = 0;
};

enum class ProbeResult { Answered, Refused, Silent, Unreachable };
struct Probe {
  ProbeResult result = ProbeResult::Unreachable;
  HealthReply reply;   // when Answered
  std::string detail;  // how it failed ("connection refused", "connect timed out after 1 s")
};

// Asks every address at once, but index `from` (this rank: left Answered with rank -1); each
// answer by `deadline`.
std::vector<Probe> probe_all(const std::vector<HealthAddress>& peers, int from, uint64_t nonce,
                             Deadline deadline);
// Tells `text` to every address whose index is in `to`, best effort, by `deadline`.
void tell_all(const std::vector<HealthAddress>& peers, const std::vector<int>& to, int from,
              uint64_t nonce, const std::string& text, Deadline deadline);

class HealthServer {
 public:
  // Listens on bind_host ("" = every interface) on a free port and serves on its own thread.
  HealthServer(int rank, const std::string& bind_host, std::shared_ptr<Progress> progress);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  int port() const { return port_; }
  // Requests are answered once the job's nonce is known (rank 0's, after the rendezvous).
  void set_nonce(uint64_t nonce);
  const std::shared_ptr<Progress>& progress() const { return progress_; }
  // The first verdict a peer told this rank, and who told it ("" and -1 if none yet).
  std::pair<std::string, int> verdict() const;

 private:
  void loop();
  void serve(const Socket& s);

  int rank_;
  std::shared_ptr<Progress> progress_;
  Socket listener_;
  int port_ = 0;
  int stop_pipe_[2] = {-1, -1};
  std::atomic<uint64_t> nonce_{0};
  mutable std::mutex mu_;
  std::string verdict_;
  int verdict_from_ = -1;
  std::thread thread_;
};

}  // namespace engine::comm
