// parallel/elastic.h: training that outlives a lost rank (train --on-rank-loss continue; docs/
// launchers.md "When a rank is lost, the others go on"). When a collective fails because a member
// is gone, frozen or cut off, the survivors regroup through the store into the next generation
// (comm/rendezvous/membership.h), connect a new communicator among themselves, and every member
// takes the state of the one that completed the most steps, streamed over the new communicator
// and checked by a digest. The step in flight is dropped: a member that completed it is the
// source, the others take its state, so no member keeps a partial update. What a member changed
// since its last completed step without completing the next (BatchNorm's running statistics in a
// forward, the dropout stream) is put back from a copy kept at every step boundary. A lost rank
// started again (launch --on-rank-loss continue) asks to join through the store; the members admit
// it at a step boundary (a new generation) and it takes the same state.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/rendezvous/membership.h"
#include "comm/rendezvous/rendezvous.h"
#include "nn/checkpoint.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace engine::parallel {

// What a member keeps at each step boundary: its position (and epoch loss so far) and a copy of
// the model's buffers.
class StepBoundary {
 public:
  void keep(const nn::NamedTensors& buffers, const nn::TrainPosition& pos);
  // Puts the buffers kept back into `buffers` (the same names, in the same order).
  void restore(const nn::NamedTensors& buffers) const;
  const nn::TrainPosition& position() const { return pos_; }
  // The position as one number that grows with every boundary (steps, then epochs: an epoch's end
  // comes after its last step): members compare it when they regroup.
  int64_t progress() const { return (pos_.step << 20) + pos_.epoch; }

 private:
  nn::TrainPosition pos_;
  std::vector<Tensor> copies_;
};

// Thrown at a step boundary when the members admit newcomers (Elastic::admissions_due): the
// trainer leaves the epoch and calls Elastic::admit. Not an engine::Error.
struct Admission {};

// One membership change, for the line rank 0 prints and --metrics.
struct Regrouped {
  std::unique_ptr<comm::Communicator> comm;
  comm::Membership membership;
  std::vector<int> lost;             // ids of the members left out
  std::vector<std::string> reasons;  // why each was lost ("its process exited")
  std::vector<int> joined;           // ids of the newcomers admitted
  std::string why;                   // what ended the old generation (its first error)
};

class Elastic;

// How a process enters a job under --on-rank-loss continue (Elastic::enter).
struct Entry {
  // A member's (when regrouped: regrouped->comm); null for a newcomer or a job of one.
  std::unique_ptr<comm::Communicator> comm;
  std::unique_ptr<Elastic> elastic;    // null for a job of one, or a newcomer whose job finished
  bool newcomer = false;               // it asked to join a running job (admitted: elastic set)
  int rank = 0, world = 1;             // a newcomer's: its launcher's, until admitted
  std::optional<Regrouped> regrouped;  // ranks lost while generation 0 connected (comm: the rest's)
};

class Elastic {
 public:
  // With agent_store (ENGINE_AGENT_STORE=1: the launcher serves the store) and the job already
  // running, the process asks to join and waits to be admitted (a newcomer). Otherwise it meets
  // as a member of generation 0, in one place of the store (elastic/0/engine/, not one per connect
  // of a rank), so that a rank started again before the others connected takes the lost one's
  // place; when a rank is lost while they connect, the others regroup and start without it (a
  // rank that comes too late for them asks to join). Rank 0 then marks the job running.
  static Entry enter(const comm::InitOptions& o, bool agent_store);

  // A member of generation 0: the job's store (it must outlive any one rank: served by launch,
  // not by a training rank), this process's rank, the world, and how members connect again.
  Elastic(std::shared_ptr<comm::Store> store, int rank, int world, comm::ConnectOptions connect);
  // Once the members have connected: rank 0 marks the job running (comm::mark_running). Until
  // then a rank started again takes the lost one's place in generation 0's meeting; from then
  // on it asks to join.
  void started();
  // A newcomer admitted into `admitted` (await) of a job of `world0` ranks.
  Elastic(std::shared_ptr<comm::Store> store, int world0, comm::ConnectOptions connect,
          comm::Membership admitted);
  // A newcomer of `id` asks to join and waits; nullopt when the job finished first.
  static std::optional<comm::Membership> await(comm::Store& store, int id, comm::Millis timeout);

  // True when c failed because the job lost a member: its transport is broken. (Any other error,
  // a bad input or a mismatch, ends the job as before.)
  static bool lost_a_member(comm::Communicator* c);

  // After `old` failed: the survivors regroup into the next generation, connect, and every
  // member takes the source's state at its last boundary (b), streamed over the new communicator:
  // `model` and `fresh` (an optimizer over model's parameters, as built) end as the source's;
  // `current` is this member's optimizer now. A member lost while they connect or during the
  // transfer starts another regroup (the transfer changes nothing until it is whole). Throws
  // comm::FencedError when the others went on without this member, engine::Error when no member
  // was lost after all (the old generation's error was not a lost rank's), or when the store is
  // gone.
  struct Handover {
    Regrouped group;
    nn::TrainPosition pos;  // where every member goes on from
    int source = 0;         // the id whose state they took
    size_t bytes = 0;
    double ms = 0;  // the transfer's
  };
  Handover hand_over(comm::Communicator& old, const StepBoundary& b, nn::Module& model,
                     const nn::Optimizer& current, nn::Optimizer& fresh);

  // After the current generation failed with `why` before the first step (its connect, or a
  // collective of the set-up): the survivors regroup into the next generation and connect (again
  // as often as members are lost on the way); nothing to hand over, every member sets up from the
  // start. Throws as hand_over.
  Regrouped regroup(const std::string& why);

  // At a step boundary while members are missing: rank 0 looks for newcomers in the store and,
  // finding some, publishes the next generation with them; true on every member when it did
  // (one 8-byte broadcast). False, with no collective, while the job has all its ranks.
  bool admissions_due(comm::Communicator& c, int64_t progress);
  // After admissions_due: the members and the newcomers connect, and the newcomers take the
  // source's state at b (as hand_over).
  Handover admit(const StepBoundary& b, nn::Module& model, const nn::Optimizer& current,
                 nn::Optimizer& fresh);
  // The newcomer's side: connects with the members and takes the source's state.
  Handover arrive(nn::Module& model, nn::Optimizer& fresh);
  // Rank 0 at the job's end: newcomers still waiting leave.
  void finish(int rank);

  const comm::Membership& membership() const { return m_; }
  // Changes of the world size so far (losses and admissions).
  int64_t changes() const { return changes_; }

 private:
  // The generation after the current one failed with `why` (the survivors' regroup through the
  // store); the ids lost and why, added to `into`. Throws when nobody was lost, unless
  // none_lost_ok.
  comm::Membership next_after(const std::string& why, int64_t progress, Regrouped& into,
                              bool none_lost_ok = false);
  // Makes `next` current and connects its members.
  std::unique_ptr<comm::Communicator> connect_generation(const comm::Membership& next);
  // Connects `next` and hands the source's state to every member, regrouping as often as
  // members are lost on the way.
  Handover take_state(comm::Membership next, Regrouped group, const StepBoundary* b,
                      nn::Module& model, const nn::Optimizer* current, nn::Optimizer& fresh);

  std::shared_ptr<comm::Store> store_;
  comm::ConnectOptions connect_;
  comm::Membership m_;
  int world0_ = 0;
  int64_t changes_ = 0;
  std::optional<comm::Membership> next_;  // published by admissions_due
};

// Every member of c ends with `root`'s bytes (`bytes` on root; ignored elsewhere): their size and
// FNV-1a digest first, then the bytes. Throws engine::Error naming the root when the digest of
// what arrived differs.
std::string share_state(comm::Communicator& c, int root, std::string bytes);

// FNV-1a, 64 bits.
uint64_t state_digest(const std::string& bytes);

}  // namespace engine::parallel
