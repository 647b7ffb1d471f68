// comm/algorithms/chain.h: broadcast and reduce as pipelined chains in ring order from the root
// (chain.cpp). Host memory only; sizes: c.fp.count elements of c.fp.dtype.
#pragma once
#include "comm/algorithms/context.h"

namespace engine::comm {

// Root's buffer is copied to every rank.
void chain_broadcast(const CollContext& c, void* data);
// Root's buffer receives the reduction; other ranks' buffers are left unchanged.
void chain_reduce(const CollContext& c, void* data);

}  // namespace engine::comm
