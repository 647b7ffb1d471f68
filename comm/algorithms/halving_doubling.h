// comm/algorithms/halving_doubling.h: all_reduce by Rabenseifner's algorithm
// (halving_doubling.cpp): a reduce-scatter by recursive halving, then an all-gather by recursive
// doubling. Each rank sends 2(p-1)/p of the buffer (p: the largest power of two <= W), as the ring
// does, in 2 log2 p rounds instead of 2(W-1) steps: the bandwidth of the ring with the latency of a
// tree. Host memory only; c.fp.count elements of c.fp.dtype per rank, in place.
#pragma once
#include "comm/algorithms/context.h"

namespace engine::comm {

void rh_all_reduce(const CollContext& c, void* data);

}  // namespace engine::comm
