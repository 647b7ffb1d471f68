// comm/algorithms/algorithms.cpp: which algorithm runs each collective (the algorithms themselves
// are ring.cpp, chain.cpp, direct.cpp, recursive_doubling.cpp, halving_doubling.cpp and tree.cpp;
// auto's choice is tuning.cpp's).
#include "comm/algorithms/algorithms.h"

#include "core/error.h"

namespace engine::comm {

Algo chosen_algo(const CollContext& c) {
  const size_t nbytes = c.fp.count * dtype_size(c.fp.dtype);
  if (c.fp.op == CollOp::AllReduce)
    return c.algo == Algo::Auto ? auto_all_reduce(nbytes, c.world()) : c.algo;
  if (c.algo == Algo::Tree || c.algo == Algo::Ring) return c.algo;
  return auto_rooted(nbytes, c.world());
}

void run_algorithm(const CollContext& c, const void* in, void* out) {
  switch (c.fp.op) {
    case CollOp::AllReduce:
      switch (chosen_algo(c)) {
        case Algo::Rd:
          return rd_all_reduce(c, out);
        case Algo::Rh:
          return rh_all_reduce(c, out);
        case Algo::Tree:
          return tree_all_reduce(c, out);
        default:
          return ring_all_reduce(c, out);
      }
    case CollOp::AllGather:
      return ring_all_gather(c, in, out);
    case CollOp::ReduceScatter:
      return ring_reduce_scatter(c, in, out);
    case CollOp::Broadcast:
      return chosen_algo(c) == Algo::Tree ? tree_broadcast(c, out) : chain_broadcast(c, out);
    case CollOp::Reduce:
      return chosen_algo(c) == Algo::Tree ? tree_reduce(c, out) : chain_reduce(c, out);
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
