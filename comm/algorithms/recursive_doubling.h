// comm/algorithms/recursive_doubling.h: all_reduce by recursive doubling (recursive_doubling.cpp),
// the latency-optimal algorithm for small messages: ceil(log2 W) rounds (+2 when W is not a power
// of two) in which every rank exchanges its whole buffer with one partner, against the ring's
// 2(W-1) steps. Host memory only; c.fp.count elements of c.fp.dtype per rank, in place.
#pragma once
#include "comm/algorithms/context.h"

namespace engine::comm {

void rd_all_reduce(const CollContext& c, void* data);

}  // namespace engine::comm
