// comm/groups/two_level.cpp: all_reduce in two levels across hosts, as Horovod's hierarchical
// allreduce: reduce to each host's leader (its lowest rank) over the host's own transport (shared
// memory), all_reduce among the leaders (one per host: the only traffic between hosts), then
// broadcast inside each host. A flat ring over H hosts of L ranks sends 2(W-1)/W of the buffer
// across each host's link, twice where the ring leaves and enters a host; the leaders' ring sends
// 2(H-1)/H once. The groups come from split() at the first such call, on every rank alike.
#include "comm/communicator.h"
#include "core/error.h"

namespace engine::comm {

const char* two_level_name(TwoLevel t) {
  switch (t) {
    case TwoLevel::Auto:
      return "auto";
    case TwoLevel::On:
      return "on";
    case TwoLevel::Off:
      return "off";
  }
  return "?";
}

TwoLevel two_level_from_name(const std::string& s) {
  if (s == "auto") return TwoLevel::Auto;
  if (s == "on") return TwoLevel::On;
  if (s == "off") return TwoLevel::Off;
  throw Error("two-level: expected auto, on or off, got '" + s + "'");
}

bool Communicator::uses_two_level() const {
  if (opts_.two_level == TwoLevel::Off || hosts_.empty()) return false;
  const int H = num_hosts(), W = size();
  if (H < 2 || H == W) return false;  // one host, or one rank per host: nothing to gain
  if (opts_.two_level == TwoLevel::On) return true;
  std::vector<int> per_host(H, 0);
  for (int h : hosts_) ++per_host[h];
  for (int n : per_host)
    if (n < 2) return false;
  return true;
}

void Communicator::host_all_reduce(const CollContext& c, void* data) {
  if (!uses_two_level()) return host_->host_buffers(c, nullptr, data);
  two_level_all_reduce(data, c.fp.count, c.fp.dtype, c.fp.redop);
}

void Communicator::two_level_all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  if (!two_level_ready_) {
    two_level_ready_ = true;
    host_comm_ = split(hosts_[rank()], rank());
    leaders_comm_ = split(local_rank_ == 0 ? 0 : kNoColor, rank());
  }
  // Avg sums at both levels and divides once, by the whole job's size.
  const ReduceOp inner = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  host_comm_->reduce(data, count, dtype, inner, 0);
  if (leaders_comm_) {
    leaders_comm_->all_reduce(data, count, dtype, inner);
    if (op == ReduceOp::Avg) divide_by(data, count, dtype, size());
  }
  host_comm_->broadcast(data, count, dtype, 0);
}

}  // namespace engine::comm
