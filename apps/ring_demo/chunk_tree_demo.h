// apps/ring_demo/chunk_tree_demo.h: `ring_demo --algo chunk-tree`: the sum over the fixed chunk
// tree that `train --world-invariant` runs (core/chunk_tree.h, comm/algorithms/chunk_tree.h), on a
// small example beside the ring. The leaves are the C chunks of a batch, not the ranks: rank r
// takes its whole chunks, folds them as far as the tree allows, and the real
// chunk_tree_all_reduce (W ranks as threads over the in-memory transport) finishes the tree. The
// report shows the tree, who holds which node, the slices' owners, the bytes, and the result
// against one process bit for bit; then the ring's way (each rank sums its chunks, the ring sums
// the ranks), whose bits change with W. With a rank lost: the survivors' new generation, their
// chunks, and the same bits again.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace engine::ring_demo {

struct TreeConfig {
  int world = 4;
  size_t chunks = 6;  // the tree's leaves: chunks of a batch
  size_t count = 8;   // float32 elements per chunk
  std::vector<float>
      values;  // chunks * count, chunk-major; empty: chunk j holds 1 / (j + 1 + i / 2)
  // >= 0: that rank is lost after the sum; the others regroup through a store as train
  // --on-rank-loss continue's ranks do (comm/rendezvous/membership.h) and sum again, W - 1.
  int lose = -1;
};

// Throws engine::Error naming the flag when c is out of the demo's range.
void check_tree_config(const TreeConfig& c);

// Runs it and returns the text; *same: the tree's result equals one process's bit for bit on
// every rank. Throws engine::Error for a failed collective.
std::string chunk_tree_demo(const TreeConfig& c, bool* same);

}  // namespace engine::ring_demo
