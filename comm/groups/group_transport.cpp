// comm/groups/group_transport.cpp: see group_transport.h.
#include "comm/groups/group_transport.h"

#include "core/error.h"

namespace engine::comm {

GroupTransport::GroupTransport(std::shared_ptr<Transport> parent, std::vector<int> members,
                               int rank, uint16_t group)
    : Transport(rank, static_cast<int>(members.size()), parent->kind()),
      parent_(std::move(parent)),
      members_(std::move(members)),
      group_(group) {
  ENGINE_CHECK(rank >= 0 && rank < world(), "group transport: rank ", rank, " of ", world());
}

int GroupTransport::map(int peer) const {
  ENGINE_CHECK(peer >= 0 && peer < world() && peer != rank(), describe(), ": bad peer group rank ",
               peer);
  return members_[peer];
}

std::string GroupTransport::describe() const {
  std::string g, p;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i > 0) {
      g += ',';
      p += ',';
    }
    g += std::to_string(i);
    p += std::to_string(members_[i]);
  }
  return "group " + std::to_string(group_) + " (group ranks " + g + " = ranks " + p +
         "; this is group rank " + std::to_string(rank()) + " = rank " +
         std::to_string(members_[rank()]) + ")";
}

template <class F>
auto GroupTransport::named(F&& f) const -> decltype(f()) {
  try {
    return f();
  } catch (const TimeoutError& e) {
    throw TimeoutError(describe() + ": " + e.what());
  } catch (const Error& e) {
    throw Error(describe() + ": " + e.what());
  }
}

RequestPtr GroupTransport::isend(int peer, Lane s, const FrameHeader& h, const void* data) {
  return named([&] { return parent_->isend(map(peer), s, h, data); });
}

RequestPtr GroupTransport::irecv(int peer, Lane s, const FrameHeader& expect, void* dst) {
  return named([&] { return parent_->irecv(map(peer), s, expect, dst); });
}

RequestPtr GroupTransport::irecv_reduce(int peer, Lane s, const FrameHeader& expect, void* dst,
                                        DType dt, ReduceOp op) {
  return named([&] { return parent_->irecv_reduce(map(peer), s, expect, dst, dt, op); });
}

void GroupTransport::wait(const RequestPtr& r, Deadline deadline) {
  named([&] { parent_->wait(r, deadline); });
}

bool GroupTransport::test(const RequestPtr& r) {
  return named([&] { return parent_->test(r); });
}

void GroupTransport::abort(const std::string& reason) noexcept {
  parent_->abort(reason);
}

}  // namespace engine::comm
