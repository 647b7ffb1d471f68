// comm/groups/two_level.cpp: all_reduce in two levels across hosts, as Horovod's hierarchical
// allreduce: reduce to each host's leader (its lowest rank) over the host's own transport (shared
// memory), all_reduce among the leaders (one per host: the only traffic between hosts), then
// broadcast inside each host. A flat ring over H hosts of L ranks sends 2(W-1)/W of the buffer
// across each host's link, twice where the ring leaves and enters a host; the leaders' ring sends
// 2(H-1)/H once. The groups come from split() at the first such call, on every rank alike.
#include <algorithm>
#include <utility>
#include <vector>

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
  // Off, one host known, or a host backend of its own (MPI: every collective through MPI).
  if (opts_.two_level == TwoLevel::Off || hosts_.empty() || host_path() != "host") return false;
  const int H = num_hosts(), W = size();
  if (H < 2 || H == W) return false;  // one host, or one rank per host: nothing to gain
  if (opts_.two_level == TwoLevel::On) return true;
  if (opts_.algo != Algo::Auto) return false;  // a named algorithm: that one, flat
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

namespace {

// The pipeline's pieces: at least 1 MiB each and at most 8 of them (1 below 2 MiB: no pipeline).
size_t piece_count(size_t count, DType dtype) {
  const size_t min_piece = (size_t{1} << 20) / dtype_size(dtype);
  return std::max<size_t>(1, std::min<size_t>(8, count / min_piece));
}

}  // namespace

// Leaders pipeline the pieces: every piece's reduce is queued at once on the host group's
// communication thread; piece k's all_reduce among the leaders runs here as soon as its reduce is
// done, and its broadcast is queued behind it, so the host's shared-memory work overlaps the
// hosts' link. The others reduce then broadcast the pieces in the same order (the host group's
// calls run in call order on every member). The two groups use different pairs of ranks, so
// their messages never share a lane.
void Communicator::two_level_all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  if (!two_level_ready_) {
    two_level_ready_ = true;
    host_comm_ = split(hosts_[rank()], rank());
    leaders_comm_ = split(local_rank_ == 0 ? 0 : kNoColor, rank());
  }
  // Avg sums at both levels and divides once, by the whole job's size.
  const ReduceOp inner = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  const size_t K = piece_count(count, dtype), es = dtype_size(dtype);
  auto piece = [&](size_t k) {
    const size_t lo = count * k / K, hi = count * (k + 1) / K;
    return std::pair<std::byte*, size_t>(static_cast<std::byte*>(data) + lo * es, hi - lo);
  };
  if (!leaders_comm_) {
    for (size_t k = 0; k < K; ++k)
      host_comm_->reduce(piece(k).first, piece(k).second, dtype, inner, 0);
    for (size_t k = 0; k < K; ++k) host_comm_->broadcast(piece(k).first, piece(k).second, dtype, 0);
    return;
  }
  std::vector<Work> reduces, broadcasts;
  try {
    for (size_t k = 0; k < K; ++k)
      reduces.push_back(host_comm_->reduce_async(piece(k).first, piece(k).second, dtype, inner, 0));
    for (size_t k = 0; k < K; ++k) {
      auto [p, n] = piece(k);
      reduces[k].wait();
      leaders_comm_->all_reduce(p, n, dtype, inner);
      if (op == ReduceOp::Avg) divide_by(p, n, dtype, size());
      broadcasts.push_back(host_comm_->broadcast_async(p, n, dtype, 0));
    }
    for (auto& w : broadcasts) w.wait();
  } catch (...) {
    // Nothing queued may touch `data` after this returns: wait out (bounded by the timeout, and
    // quick once the transport is broken) what is still queued.
    for (auto* ws : {&reduces, &broadcasts})
      for (auto& w : *ws) try {
          w.wait();
        } catch (...) {
        }
    throw;
  }
}

}  // namespace engine::comm
