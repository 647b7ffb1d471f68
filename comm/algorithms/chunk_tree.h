// comm/algorithms/chunk_tree.h: the all_reduce over the fixed tree of core/chunk_tree.h
// (chunk_tree.cpp): every rank passes the tree nodes it holds (the partial sums of its chunks of
// a global batch, folded as far as they go), every rank gets the root, with the same bits
// whatever the world size and whichever rank held which node. Host memory only; c.fp.count
// elements of c.fp.dtype per node, c.fp.root the tree's leaves, Sum.
#pragma once
#include <cstddef>

#include "comm/algorithms/context.h"
#include "core/chunk_tree.h"

namespace engine::comm {

// One node of the tree and this rank's partial for it: c.fp.count elements.
struct TreePartial {
  chunk_tree::Node node;
  const void* data = nullptr;
};

// The root into out (count elements) on every rank. The nodes of all ranks together must cover
// the leaves [0, c.fp.root) once each, else every rank throws an engine::Error naming the leaf
// and the rank(s). out may be one of this rank's partials' buffers.
void chunk_tree_all_reduce(const CollContext& c, const TreePartial* parts, size_t nparts,
                           void* out);

}  // namespace engine::comm
