// comm/rendezvous/membership.h: who is in the job after a rank is lost (train --on-rank-loss
// continue; docs/launchers.md "When a rank is lost, the others go on"). The members of a job are
// numbered by the rank each had in generation 0 (its id, the launcher's RANK); each generation is
// the list of ids that agreed to go on together, and a member's rank in it is its index in that
// list.
//
// Regrouping after generation g failed, through the store (which must outlive any one rank):
//   elastic/<g+1>/joined/<id>  "<progress>\n<ids this member saw lost, comma-separated>"
//   elastic/<g+1>/closer       an add() counter: the member that takes 1 closes the generation
//   elastic/<g+1>/members      "<id>:<progress>,<id>:<progress>,...": the closer's decision, final
// Every survivor registers; the closer waits until every member of g has registered or been seen
// lost by a registered member, or at most min(timeout, 5 s), and publishes who registered. A member
// not in the list (it came back after it was fenced: SIGCONT, a healed link) gets FencedError and
// must leave without touching the others' state.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/base/deadline.h"
#include "comm/base/store.h"
#include "core/error.h"

namespace engine::comm {

struct Membership {
  int64_t generation = 0;
  std::vector<int> ids;  // ascending
  // Each member's progress when it registered: how many step boundaries it had passed (steps
  // completed, epochs ended), equal on members that stand at the same point; generation 0: zeros.
  std::vector<int64_t> progress;
  int rank = -1;  // this member's index in ids

  int world() const { return static_cast<int>(ids.size()); }
  int id() const { return ids.at(static_cast<size_t>(rank)); }
  // The most progress of any member: where the job goes on from.
  int64_t furthest() const;
  // The first member (lowest rank) at furthest(): whose state the others take.
  int source() const;
  // Ids of `before` that are not members now.
  std::vector<int> lost_since(const Membership& before) const;
};

// Generation 0: ids 0 .. world-1, this process id `rank`.
Membership initial_membership(int rank, int world);

// A member left out of a generation it tried to join.
class FencedError : public Error {
 public:
  using Error::Error;
};

// After generation `old` failed: registers this member (its progress, the ids it saw lost)
// in generation old.generation + 1 and returns that generation once its closer published it.
// Throws FencedError when this member is not in it, TimeoutError when no decision came within
// `timeout` after the closer's wait, engine::Error when the store cannot be reached.
Membership regroup(Store& store, const Membership& old, int64_t progress,
                   const std::vector<int>& seen_lost, Millis timeout);

// Re-admission (launch --on-rank-loss continue starts a lost rank again, same RANK):
//   elastic/running          set once generation 0 is connected: a process of the job that finds
//                            it is a newcomer and asks to join instead of meeting as in generation
//                            0
//   elastic/joining/<id>     add() counter: the newcomers of that id so far (asks)
//   elastic/admitted/<id>    add() counter: the asks granted
//   elastic/admit/<id>/<n>   the generation that ask n joins (the latest ask is answered)
//   elastic/done             the job finished: a newcomer still waiting leaves
// At a step boundary the members' rank 0 looks for asks (joiners) and publishes the next
// generation itself (admit): the members, then the newcomers, whose progress -1 never makes them
// the source.
void mark_running(Store& store);
bool job_running(Store& store);
void mark_done(Store& store);
// The ids below `world0` that are not members of `now` and have an ask not yet granted.
std::vector<int> joiners(Store& store, const Membership& now, int world0);
// Rank 0 of `now`: generation now.generation + 1 of the members (all at `progress`) and the
// joiners, published; nullopt when a regroup already took that generation (a member was lost).
std::optional<Membership> admit(Store& store, const Membership& now,
                                const std::vector<int>& joiners, int64_t progress);
// The other members of `now`, told by rank 0 that it admitted: the generation it published.
Membership admitted(Store& store, const Membership& now, Millis timeout);
// A newcomer of `id`: asks, then waits for the generation it joins; nullopt when the job
// finished first. TimeoutError after `timeout` with no answer.
std::optional<Membership> await_admission(Store& store, int id, Millis timeout);

// Generation g's members once its closer published them (without waiting; nullopt before): what a
// launcher watches to end the local ranks left out (a frozen process never exits by itself).
std::optional<std::vector<int>> generation_members(Store& store, int64_t g);

// "0, 2, 3"
std::string id_list(const std::vector<int>& ids);

}  // namespace engine::comm
