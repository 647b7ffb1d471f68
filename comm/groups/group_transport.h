// comm/groups/group_transport.h: a split() group's transport (comm/communicator.h,
// Communicator::split): the group's G ranks numbered 0..G-1, over its parent's channels. Each
// request goes to the parent with the group rank mapped to the parent's rank; the frames carry the
// group id (Fingerprint::group, set by the group's Communicator), so that a frame of another group
// or of the parent is an error naming both calls instead of bytes taken for this group's.
//
// Messages of the parent and of its groups share each pair's collective lane, in the order they
// are posted: two ranks must call the collectives of the communicators they share in the same
// order (as MPI asks of blocking collectives), and not from two threads at once. An error in a
// group breaks the parent's transport too (the channels are the same); its message names the group
// ranks and the parent's ranks.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/transport/transport.h"

namespace engine::comm {

class GroupTransport final : public Transport {
 public:
  // members[g]: the parent rank of group rank g; this rank is group rank `rank`.
  GroupTransport(std::shared_ptr<Transport> parent, std::vector<int> members, int rank,
                 uint16_t group);

  RequestPtr isend(int peer, Lane s, const FrameHeader& h, const void* data) override;
  RequestPtr irecv(int peer, Lane s, const FrameHeader& expect, void* dst) override;
  RequestPtr irecv_reduce(int peer, Lane s, const FrameHeader& expect, void* dst, DType dt,
                          ReduceOp op) override;
  // The parent's wait; its errors come back with the group's ranks beside the parent's.
  void wait(const RequestPtr& r, Deadline deadline) override;
  bool test(const RequestPtr& r) override;
  void abort(const std::string& reason) noexcept override;
  bool broken() const override { return parent_->broken(); }

  // The parent rank of group rank g.
  int parent_rank(int g) const { return members_.at(g); }
  const std::vector<int>& members() const { return members_; }
  uint16_t group() const { return group_; }
  // "group 7 (group ranks 0,1,2 = ranks 1,3,5; this is group rank 1 = rank 3)"
  std::string describe() const;

 private:
  int map(int peer) const;
  // Runs f; an engine::Error it throws comes back prefixed with describe().
  template <class F>
  auto named(F&& f) const -> decltype(f());

  std::shared_ptr<Transport> parent_;
  std::vector<int> members_;
  uint16_t group_;
};

}  // namespace engine::comm
