// comm/backends/cuda_ipc/protocol/describe.cpp: the one-line error of a failed protocol call
// (describe.h).
#include "comm/backends/cuda_ipc/protocol/describe.h"

#include "comm/base/deadline.h"
#include "comm/base/reduce.h"
#include "core/error.h"
#include "io/dtype.h"

namespace engine::comm::ipc::proto {
namespace {

std::string rank_role(int q, const CallLabel& c) {
  const int W = c.world;
  if (W > 2 && q == (c.rank + 1) % W) return detail::concat("rank ", q, " (next)");
  if (W > 2 && q == (c.rank + W - 1) % W) return detail::concat("rank ", q, " (prev)");
  return detail::concat("rank ", q);
}

const char* what_name(int what) {
  switch (what) {
    case kHello:
      return "its call words (sequence, count, op, dtype)";
    case kLlData:
      return "its LL lines";
    case kSlotData:
      return "a FIFO slot";
    default:
      return "a free FIFO slot (credit)";
  }
}

// The call that a peer's words describe.
std::string peer_call(const ErrorRecord& e) {
  const auto op = static_cast<kernels::ReduceOp>(word_op(e.seen));
  const auto dt = static_cast<DType>(word_dtype(e.seen));
  return detail::concat("#", word_seq(e.seen), " of ", e.seen1, " ", dtype_long_name(dt), " (",
                        reduce_op_name(op), ")");
}

std::string body(const ErrorRecord& e, const CallLabel& c) {
  const std::string culprit = rank_role(e.peer, c);
  const std::string waited = seconds_str(Millis(static_cast<int64_t>(e.waited_ns / 1000000)));
  switch (e.kind) {
    case kMismatch:
      return detail::concat(culprit, " called all_reduce ", peer_call(e),
                            ": every rank must call with the same count, op and dtype");
    case kPeerFailed:
      return detail::concat(rank_role(e.neighbour, c), " failed this call and blames ", culprit);
    case kAborted:
      return detail::concat("aborted by the host while waiting for ", rank_role(e.neighbour, c),
                            " (", what_name(e.what), ")");
    default: {
      std::string s = detail::concat(culprit, " made no progress: waited ", waited, " for ",
                                     rank_role(e.neighbour, c), " to deliver ", what_name(e.what));
      if (e.unit >= 0) s += detail::concat(" (channel ", e.channel, ", ring unit ", e.unit, ")");
      if (e.neighbour != e.peer) s += detail::concat(", which itself waits for ", culprit);
      return s;
    }
  }
}

}  // namespace

std::string describe_error(const ErrorRecord& e, const CallLabel& c) {
  const std::string dev = c.device >= 0 ? detail::concat(" (cuda:", c.device, ")") : "";
  return detail::concat("ipc_ring all_reduce #", e.seq, " of ", c.count, " floats (", c.op, ", ",
                        c.protocol, ") on rank ", c.rank, " of ", c.world, dev, ": ", body(e, c),
                        " (timeout ", seconds_str(c.timeout), "); the ring is broken");
}

}  // namespace engine::comm::ipc::proto
