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

Elastic::Elastic(std::shared_ptr<comm::Store> store, int rank, int world,
                 comm::ConnectOptions connect)
    : store_(std::move(store)),
      connect_(std::move(connect)),
      m_(comm::initial_membership(rank, world)),
      world0_(world) {
  ENGINE_CHECK(store_, "--on-rank-loss continue needs the job's store (a rendezvous through one)");
}

namespace {

Entry ask_to_join(const comm::InitTarget& t, const comm::ConnectOptions& o) {
  Entry e;
  e.newcomer = true;
  e.rank = t.rank;
  e.world = t.world_size;
  if (std::optional<comm::Membership> m = Elastic::await(*t.store, t.rank, o.timeout))
    e.elastic = std::make_unique<Elastic>(t.store, t.world_size, o, *m);
  return e;
}

}  // namespace

Entry Elastic::enter(const comm::InitOptions& opts, bool agent_store) {
  comm::InitOptions o = opts;
  o.connect.meeting = "elastic/0/engine/";
  const std::optional<comm::InitTarget> t = comm::job_target(o);
  if (!t) return {};
  if (agent_store && comm::job_running(*t->store)) return ask_to_join(*t, opts.connect);
  Entry e;
  e.elastic = std::make_unique<Elastic>(t->store, t->rank, t->world_size, opts.connect);
  try {
    e.comm = comm::connect_communicator(t->store, t->rank, t->world_size, o.connect);
  } catch (const Error& err) {
    try {
      e.regrouped = e.elastic->regroup(err.what());
    } catch (const comm::FencedError&) {  // it came too late for them: it asks, as a replacement
      return ask_to_join(*t, opts.connect);
    }
  }
  const comm::Communicator& c = e.comm ? *e.comm : *e.regrouped->comm;
  e.rank = c.rank();
  e.world = c.size();
  e.elastic->started();
  return e;
}

void Elastic::started() {
  if (m_.rank == 0) comm::mark_running(*store_);
}

Elastic::Elastic(std::shared_ptr<comm::Store> store, int world0, comm::ConnectOptions connect,
                 comm::Membership admitted)
    : store_(std::move(store)),
      connect_(std::move(connect)),
      m_(std::move(admitted)),
      world0_(world0),
      changes_(m_.generation) {
  next_ = m_;
}

std::optional<comm::Membership> Elastic::await(comm::Store& store, int id, comm::Millis timeout) {
  return comm::await_admission(store, id, timeout);
}

bool Elastic::lost_a_member(comm::Communicator* c) {
  return c != nullptr && c->transport().broken();
}

comm::Membership Elastic::next_after(const std::string& why, int64_t progress, Regrouped& into,
                                     bool none_lost_ok) {
  std::vector<int> seen;  // the ranks the failed generation's error names, as ids
  for (int index : comm::blamed_ranks(why))
    if (index >= 0 && index < m_.world() && index != m_.rank) seen.push_back(m_.ids[index]);
  comm::Membership next;
  try {
    next = comm::regroup(*store_, m_, progress, seen, connect_.timeout);
  } catch (const comm::FencedError&) {
    throw;
  } catch (const Error& e) {  // a cut link, or the store went with its host
    ENGINE_FAIL("rank ", m_.id(), " cannot regroup through the job's store (", e.what(),
                ") after generation ", m_.generation, " failed: ", why);
  }
  const std::vector<int> lost = next.lost_since(m_);
  ENGINE_CHECK(!lost.empty() || none_lost_ok, "every member of generation ", m_.generation,
               " is alive, so its error was not a lost rank's: ", why);
  into.why = why;
  for (int id : lost) {
    const auto at = std::find(m_.ids.begin(), m_.ids.end(), id) - m_.ids.begin();
    into.lost.push_back(id);
    into.reasons.push_back(loss_reason(why, static_cast<int>(at), next.generation));
  }
  return next;
}

std::unique_ptr<comm::Communicator> Elastic::connect_generation(const comm::Membership& next) {
  if (next.world() != m_.world()) ++changes_;
  m_ = next;
  comm::ConnectOptions o = connect_;
  o.meeting = "elastic/" + std::to_string(next.generation) + "/engine/";
  // Every member was alive a moment ago: a long wait here means one was lost meanwhile.
  o.timeout = std::min(connect_.timeout, comm::Millis(10000));
  return comm::connect_communicator(store_, next.rank, next.world(), o);
}

Elastic::Handover Elastic::take_state(comm::Membership next, Regrouped group, const StepBoundary* b,
                                      nn::Module& model, const nn::Optimizer* current,
                                      nn::Optimizer& fresh) {
  const int64_t progress = b ? b->progress() : -1;
  Handover h;
  h.group = std::move(group);
  const std::vector<int> before = m_.ids;
  while (true) {
    try {
      h.group.comm = connect_generation(next);
    } catch (const Error& e) {  // a member lost before it connected (a newcomer, say)
      next = next_after(e.what(), progress, h.group);
      continue;
    }
    const int source = m_.source();
    h.source = m_.ids[static_cast<size_t>(source)];
    std::string state;
    if (m_.rank == source) {  // its last boundary: no partial step
      b->restore(model.named_buffers());
      state = nn::encode_training_checkpoint(model, *current, b->position());
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      state = share_state(*h.group.comm, source, std::move(state));
    } catch (const Error&) {
      if (!lost_a_member(h.group.comm.get())) throw;
      next = next_after(h.group.comm->transport().broken_reason(), progress, h.group);
      continue;
    }
    h.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    h.bytes = state.size();
    h.pos = nn::decode_training_checkpoint(state, model, fresh,
                                           "rank " + std::to_string(h.source) + "'s state");
    h.group.membership = m_;
    for (int id : m_.ids)
      if (std::find(before.begin(), before.end(), id) == before.end()) h.group.joined.push_back(id);
    return h;
  }
}

Elastic::Handover Elastic::hand_over(comm::Communicator& old, const StepBoundary& b,
                                     nn::Module& model, const nn::Optimizer& current,
                                     nn::Optimizer& fresh) {
  Regrouped group;
  comm::Membership next = next_after(old.transport().broken_reason(), b.progress(), group);
  return take_state(std::move(next), std::move(group), &b, model, &current, fresh);
}

Regrouped Elastic::regroup(const std::string& why) {
  // Before the first step a failed connect may have lost nobody: a rank started again in a lost
  // one's place while the others connected to the lost one. They meet again, a few times at most.
  constexpr int kAllAlive = 3;
  Regrouped group;
  int all_alive = 0;
  comm::Membership next = next_after(why, 0, group, ++all_alive <= kAllAlive);
  while (true) {
    try {
      group.comm = connect_generation(next);
      group.membership = m_;
      return group;
    } catch (const Error& e) {  // a member lost before it connected
      next = next_after(e.what(), 0, group, ++all_alive <= kAllAlive);
    }
  }
}

bool Elastic::admissions_due(comm::Communicator& c, int64_t progress) {
  if (m_.world() >= world0_) return false;
  int64_t admitting = 0;
  if (m_.rank == 0) {
    const std::vector<int> asks = comm::joiners(*store_, m_, world0_);
    if (!asks.empty()) next_ = comm::admit(*store_, m_, asks, progress);
    admitting = !asks.empty() && next_ ? 1 : 0;
  }
  c.broadcast(&admitting, 1, DType::I64, 0);
  if (admitting && m_.rank != 0) next_ = comm::admitted(*store_, m_, connect_.timeout);
  return admitting != 0;
}

Elastic::Handover Elastic::admit(const StepBoundary& b, nn::Module& model,
                                 const nn::Optimizer& current, nn::Optimizer& fresh) {
  ENGINE_CHECK(next_, "Elastic::admit without an admission (admissions_due)");
  comm::Membership next = *next_;
  next_.reset();
  return take_state(std::move(next), {}, &b, model, &current, fresh);
}

Elastic::Handover Elastic::arrive(nn::Module& model, nn::Optimizer& fresh) {
  ENGINE_CHECK(next_, "Elastic::arrive: this process was not admitted");
  comm::Membership next = *next_;
  next_.reset();
  m_ = comm::Membership{};  // a newcomer was in no generation before
  changes_ = next.generation - 1;
  return take_state(std::move(next), {}, nullptr, model, nullptr, fresh);
}

void Elastic::finish(int rank) {
  if (rank == 0) comm::mark_done(*store_);
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
