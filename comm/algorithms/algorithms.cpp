// comm/algorithms/algorithms.cpp: which algorithm runs each collective (the algorithms themselves
// are ring.cpp, chain.cpp and direct.cpp).
#include "comm/algorithms/algorithms.h"

#include "core/error.h"

namespace engine::comm {

void run_algorithm(const CollContext& c, const void* in, void* out) {
  switch (c.fp.op) {
    case CollOp::AllReduce:
      return ring_all_reduce(c, out);
    case CollOp::AllGather:
      return ring_all_gather(c, in, out);
    case CollOp::ReduceScatter:
      return ring_reduce_scatter(c, in, out);
    case CollOp::Broadcast:
      return chain_broadcast(c, out);
    case CollOp::Reduce:
      return chain_reduce(c, out);
    case CollOp::Gather:
      return direct_gather(c, in, out);
    case CollOp::Scatter:
      return direct_scatter(c, in, out);
    case CollOp::Barrier:
      return barrier(c);
    default:
      ENGINE_FAIL("comm on rank ", c.rank(), ": ", coll_op_name(c.fp.op), " is not a collective");
  }
}

}  // namespace engine::comm
