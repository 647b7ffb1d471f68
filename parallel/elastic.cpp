// parallel/elastic.cpp: see elastic.h.
#include "parallel/elastic.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "comm/health/blame.h"
#include "core/autograd.h"
#include "core/error.h"

namespace engine::parallel {

void StepBoundary::keep(const nn::NamedTensors& buffers, const nn::TrainPosition& pos) {
  NoGradGuard ng;
  pos_ = pos;
  if (copies_.size() != buffers.size()) {
    copies_.clear();
    for (const auto& [name, t] : buffers) copies_.push_back(t.detach().clone());
    return;
  }
  for (size_t i = 0; i < buffers.size(); ++i) copies_[i].copy_from(buffers[i].second);
}

void StepBoundary::restore(const nn::NamedTensors& buffers) const {
  NoGradGuard ng;
  ENGINE_CHECK(copies_.size() == buffers.size(), "StepBoundary: ", copies_.size(),
               " buffers kept, ", buffers.size(), " to restore");
  for (size_t i = 0; i < buffers.size(); ++i) {
    Tensor t = buffers[i].second;  // a handle: the model's storage
    t.copy_from(copies_[i]);
  }
}

Elastic::Elastic(std::shared_ptr<comm::Store> store, int rank, int world,
                 comm::ConnectOptions connect)
    : store_(std::move(store)),
      connect_(std::move(connect)),
      m_(comm::initial_membership(rank, world)) {
  ENGINE_CHECK(store_, "--on-rank-loss continue needs the job's store (a rendezvous through one)");
}

bool Elastic::lost_a_member(comm::Communicator* c) {
  return c != nullptr && c->transport().broken();
}

namespace {

// Why the old generation's error says rank `index` stopped: "its process exited", from "rank 2 is
// gone (its process exited; health check: ...)"; what its absence says when it names nothing.
std::string loss_reason(const std::string& why, int index, int64_t generation) {
  const std::string head = "rank " + std::to_string(index) + " is ";
  for (size_t at = why.find(head); at != std::string::npos; at = why.find(head, at + 1)) {
    if (at > 0 && std::isdigit(static_cast<unsigned char>(why[at - 1]))) continue;
    const size_t open = why.find(" (", at), close = why.find_first_of(";)", open + 2);
    if (open == std::string::npos || close == std::string::npos) break;
    return why.substr(open + 2, close - open - 2);
  }
  return "it did not join generation " + std::to_string(generation);
}

}  // namespace

Regrouped Elastic::regroup(comm::Communicator& old, int64_t progress) {
  Regrouped r;
  r.why = old.transport().broken_reason();
  std::vector<int> seen;  // the ranks the old generation's error names, as ids
  for (int index : comm::blamed_ranks(r.why))
    if (index >= 0 && index < m_.world() && index != m_.rank) seen.push_back(m_.ids[index]);
  comm::Membership next = comm::regroup(*store_, m_, progress, seen, connect_.timeout);
  r.lost = next.lost_since(m_);
  ENGINE_CHECK(!r.lost.empty(), "every member of generation ", m_.generation,
               " is alive, so its error was not a lost rank's: ", r.why);
  for (int id : r.lost) {
    const int index =
        static_cast<int>(std::find(m_.ids.begin(), m_.ids.end(), id) - m_.ids.begin());
    r.reasons.push_back(loss_reason(r.why, index, next.generation));
  }
  comm::ConnectOptions o = connect_;
  o.meeting = "elastic/" + std::to_string(next.generation) + "/engine/";
  r.comm = comm::connect_communicator(store_, next.rank, next.world(), o);
  m_ = next;
  r.membership = m_;
  return r;
}

Elastic::Handover Elastic::hand_over(comm::Communicator& old, const StepBoundary& b,
                                     nn::Module& model, const nn::Optimizer& current,
                                     nn::Optimizer& fresh) {
  Handover h;
  h.group = regroup(old, b.progress());
  while (true) {
    const int source = h.group.membership.source();
    h.source = h.group.membership.ids[static_cast<size_t>(source)];
    std::string state;
    if (h.group.membership.rank == source) {  // its last boundary: no partial step
      b.restore(model.named_buffers());
      state = nn::encode_training_checkpoint(model, current, b.position());
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      state = share_state(*h.group.comm, source, std::move(state));
    } catch (const Error&) {
      if (!lost_a_member(h.group.comm.get())) throw;
      Regrouped again = regroup(*h.group.comm, b.progress());
      again.lost.insert(again.lost.begin(), h.group.lost.begin(), h.group.lost.end());
      again.reasons.insert(again.reasons.begin(), h.group.reasons.begin(), h.group.reasons.end());
      h.group = std::move(again);
      continue;
    }
    h.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    h.bytes = state.size();
    h.pos = nn::decode_training_checkpoint(state, model, fresh,
                                           "rank " + std::to_string(h.source) + "'s state");
    return h;
  }
}

uint64_t state_digest(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

std::string share_state(comm::Communicator& c, int root, std::string bytes) {
  int64_t head[2] = {static_cast<int64_t>(bytes.size()), static_cast<int64_t>(state_digest(bytes))};
  c.broadcast(head, 2, DType::I64, root);
  ENGINE_CHECK(head[0] >= 0, "rank ", root, "'s state: a size of ", head[0], " bytes");
  bytes.resize(static_cast<size_t>(head[0]));
  c.broadcast(bytes.data(), bytes.size(), DType::U8, root);
  ENGINE_CHECK(state_digest(bytes) == static_cast<uint64_t>(head[1]), "rank ", c.rank(),
               ": the state streamed from rank ", root, " (", bytes.size(),
               " bytes) does not match its digest");
  return bytes;
}

}  // namespace engine::parallel
