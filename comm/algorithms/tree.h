// comm/algorithms/tree.h: broadcast and reduce on a binomial tree (tree.cpp): ceil(log2 W) rounds
// against the chain's W-1 hops, for small messages, where hops cost more than bytes. Host memory
// only; c.fp.count elements of c.fp.dtype per rank, in place (as chain.h's).
#pragma once
#include "comm/algorithms/context.h"

namespace engine::comm {

// Root's buffer is copied to every rank.
void tree_broadcast(const CollContext& c, void* data);
// Root's buffer receives the reduction; other ranks' buffers are left unchanged.
void tree_reduce(const CollContext& c, void* data);
// In place on every rank: tree_reduce to rank 0, then tree_broadcast from it.
void tree_all_reduce(const CollContext& c, void* data);

}  // namespace engine::comm
