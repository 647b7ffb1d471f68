// parallel/elastic.h: training that outlives a lost rank (train --on-rank-loss continue; docs/
// launchers.md "When a rank is lost"). When a collective fails because a member is gone, frozen
// or cut off, the survivors regroup through the store into the next generation
// (comm/rendezvous/membership.h), connect a new communicator among themselves, and every member
// takes the state of the one that completed the most steps, streamed over the new communicator
// and checked by a digest. The step in flight is dropped: a member that completed it is the
// source, the others take its state, so no member keeps a partial update. What a member changed
// since its last completed step without completing the next (BatchNorm's running statistics in a
// forward, the dropout stream) is put back from a copy kept at every step boundary.
#pragma once
#include <cstdint>
#include <memory>
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

// One membership change, for the line rank 0 prints and --metrics.
struct Regrouped {
  std::unique_ptr<comm::Communicator> comm;
  comm::Membership membership;
  std::vector<int> lost;             // ids of the members left out
  std::vector<std::string> reasons;  // why each was lost ("its process exited")
  std::string why;                   // what ended the old generation (its first error)
};

class Elastic {
 public:
  // The job's store (it must outlive any one rank: served by launch, not by a training rank), this
  // process's rank of generation 0, and how the members connect again.
  Elastic(std::shared_ptr<comm::Store> store, int rank, int world, comm::ConnectOptions connect);

  // True when c failed because the job lost a member: its transport is broken. (Any other error,
  // a bad input or a mismatch, ends the job as before.)
  static bool lost_a_member(comm::Communicator* c);

  // The survivors' next generation, connected; `progress` this member's (StepBoundary). Throws
  // comm::FencedError when the others went on without this member, engine::Error when no
  // member was lost after all (the old generation's error was not a lost rank's), or when the
  // store is gone.
  Regrouped regroup(comm::Communicator& old, int64_t progress);

  // regroup, then every member takes the source's state at its last boundary (b), streamed over
  // the new communicator: `model` and `fresh` (an optimizer over model's parameters, as built)
  // end as the source's; `current` is this member's optimizer now. A member lost during the
  // transfer starts another regroup (the transfer changes nothing until it is whole).
  struct Handover {
    Regrouped group;
    nn::TrainPosition pos;  // where every member goes on from
    int source = 0;         // the id whose state they took
    size_t bytes = 0;
    double ms = 0;  // the transfer's
  };
  Handover hand_over(comm::Communicator& old, const StepBoundary& b, nn::Module& model,
                     const nn::Optimizer& current, nn::Optimizer& fresh);

  const comm::Membership& membership() const { return m_; }
  int64_t changes() const { return m_.generation; }

 private:
  std::shared_ptr<comm::Store> store_;
  comm::ConnectOptions connect_;
  comm::Membership m_;
};

// Every member of c ends with `root`'s bytes (`bytes` on root; ignored elsewhere): their size and
// FNV-1a digest first, then the bytes. Throws engine::Error naming the root when the digest of
// what arrived differs.
std::string share_state(comm::Communicator& c, int root, std::string bytes);

// FNV-1a, 64 bits.
uint64_t state_digest(const std::string& bytes);

}  // namespace engine::parallel
