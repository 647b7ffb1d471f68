// comm/algorithms/ring.h: the ring collectives (ring.cpp) - all_reduce, all_gather and
// reduce_scatter on one pipelined executor driven by the ring schedule
// (comm/algorithms/ring_schedule.h, which explains the algorithm step by step). Host memory only;
// sizes: c.fp.count elements of c.fp.dtype per rank.
#pragma once
#include "comm/algorithms/context.h"

namespace engine::comm {

// In place on every rank: reduce-scatter then all-gather on the ring.
void ring_all_reduce(const CollContext& c, void* data);
// out holds world * count elements: rank r's `in` lands at out + r * count.
void ring_all_gather(const CollContext& c, const void* in, void* out);
// in holds world * count elements; out (count) gets the reduction of every rank's chunk r.
void ring_reduce_scatter(const CollContext& c, const void* in, void* out);

}  // namespace engine::comm
