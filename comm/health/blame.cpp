// comm/health/blame.cpp: see blame.h.
#include "comm/health/blame.h"

#include <algorithm>
#include <regex>
#include <set>

#include "comm/transport/transport.h"
#include "core/error.h"

namespace engine::comm {

namespace {

std::string rank_str(int r) {
  return "rank " + std::to_string(r);
}

// Why a rank that did not answer stopped, from the probe and (same host) /proc.
std::string silent_reason(const Probe& p, ProcState local) {
  const std::string check = "health check: " + p.detail + ")";
  if (local == ProcState::Gone) return "is gone (its process exited; " + check;
  if (local == ProcState::Stopped)
    return "is frozen (its process is stopped, state T: SIGSTOP or a debugger; " + check;
  switch (p.result) {
    case ProbeResult::Refused:
      return "is gone (its process exited or crashed; " + check;
    case ProbeResult::Silent:
      return local == ProcState::Running
                 ? "is frozen (its process runs but does not answer; " + check
                 : "is frozen (alive but not answering: stopped or hung; " + check;
    default:
      return "is unreachable (network cut or host down; " + check;
  }
}

}  // namespace

std::vector<int> blamed_ranks(const std::string& text) {
  static const std::regex named("rank ([0-9]+) is (gone|frozen|unreachable)");
  std::set<int> ranks;
  for (std::sregex_iterator it(text.begin(), text.end(), named), end; it != end; ++it)
    ranks.insert(std::stoi((*it)[1].str()));
  return {ranks.begin(), ranks.end()};
}

Millis probe_timeout(Millis timeout) {
  return std::clamp(timeout / 2, Millis(500), Millis(2000));
}

Blamer::Blamer(int rank, std::vector<HealthAddress> peers, uint64_t nonce,
               std::shared_ptr<HealthServer> server, Millis probe)
    : rank_(rank),
      peers_(std::move(peers)),
      nonce_(nonce),
      server_(std::move(server)),
      probe_(probe) {}

std::string Blamer::told() const {
  auto [text, from] = server_->verdict();
  if (from < 0) return "";
  return text + " (found by " + rank_str(from) + ")";
}

std::string Blamer::judge(const std::vector<Probe>& probes,
                          const std::vector<ProcState>& procs) const {
  const int world = static_cast<int>(peers_.size());
  // The collective the live ranks have got to: the furthest any of them started.
  uint64_t front = server_->progress()->started.load();
  for (int r = 0; r < world; ++r)
    if (r != rank_ && probes[r].result == ProbeResult::Answered)
      front = std::max(front, probes[r].reply.started);
  std::vector<std::string> blamed;
  int unreachable = 0;
  for (int r = 0; r < world; ++r) {
    if (r == rank_) continue;
    const Probe& p = probes[r];
    if (p.result != ProbeResult::Answered) {
      const ProcState local = procs[r];
      if (p.result == ProbeResult::Unreachable && local != ProcState::Gone &&
          local != ProcState::Stopped)
        ++unreachable;
      blamed.push_back(rank_str(r) + " " + silent_reason(p, local));
      continue;
    }
    const HealthReply& a = p.reply;
    if (a.completed == a.started && a.started < front)
      blamed.push_back(rank_str(r) + " is alive but not progressing (its last collective is #" +
                       std::to_string(a.completed) + " and it is in none; the others are at #" +
                       std::to_string(front) + ")");
  }
  if (world > 2 && unreachable == world - 1)
    return rank_str(rank_) +
           " is cut off: it cannot reach any other rank (health checks of every "
           "peer timed out after " +
           seconds_str(probe_) + ")";
  std::string out;
  for (const auto& b : blamed) out += (out.empty() ? "" : "; ") + b;
  return out;
}

std::string Blamer::verdict() {
  std::lock_guard lk(mu_);
  if (done_) return verdict_;
  done_ = true;
  if (std::string t = told(); !t.empty()) return verdict_ = t;
  // /proc before the checks: a peer that exits during them (it gave up too) was not gone before.
  std::vector<ProcState> procs(peers_.size());
  for (size_t r = 0; r < peers_.size(); ++r) procs[r] = local_process_state(peers_[r]);
  const auto probes = probe_all(peers_, rank_, nonce_, Deadline::after(probe_));
  if (std::string t = told(); !t.empty()) return verdict_ = t;
  verdict_ = judge(probes, procs);
  std::vector<int> live;
  for (int r = 0; r < static_cast<int>(probes.size()); ++r)
    if (r != rank_ && probes[r].result == ProbeResult::Answered) live.push_back(r);
  if (!verdict_.empty() && !live.empty())
    tell_all(peers_, live, rank_, nonce_, verdict_, Deadline::after(probe_));
  return verdict_;
}

// ---------------------------------------------------------------------------------------------
// Rendezvous steps

std::shared_ptr<HealthServer> publish_health(Store& store, const std::string& prefix, int rank,
                                             const std::string& addr, const std::string& bind) {
  auto server = std::make_shared<HealthServer>(rank, bind, std::make_shared<Progress>());
  const HealthAddress me = self_health_address(addr, server->port());
  store.set(prefix + "health/" + std::to_string(rank), encode_health(me));
  return server;
}

void attach_blamer(Transport& t, Store& store, const std::string& prefix,
                   std::shared_ptr<HealthServer> server, uint64_t nonce, Millis timeout,
                   Deadline deadline) {
  const int world = t.world();
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(prefix + "health/" + std::to_string(r));
  store.wait(keys, deadline.remaining());
  std::vector<HealthAddress> peers(world);
  for (int r = 0; r < world; ++r) peers[r] = decode_health(store.get(keys[r]), r);
  server->set_nonce(nonce);
  t.set_progress(server->progress());
  auto blamer =
      std::make_shared<Blamer>(t.rank(), std::move(peers), nonce, server, probe_timeout(timeout));
  t.set_blame([blamer] { return blamer->verdict(); });
  t.keep_alive(server);
}

}  // namespace engine::comm
