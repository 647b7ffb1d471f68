// comm/communicator_chunk_tree.cpp: the Communicator's sum over the fixed chunk tree (the
// algorithm: comm/algorithms/chunk_tree.h). The fingerprint's root carries the tree's leaves, so
// ranks that disagree on the tree fail as ranks that disagree on a size do.
#include <limits>

#include "comm/communicator.h"
#include "core/error.h"

namespace engine::comm {

namespace {
// Bitmaps of the tree's nodes travel once per pair: 2^17 bits for this many leaves.
constexpr size_t kMaxLeaves = size_t{1} << 16;
}  // namespace

void Communicator::chunk_tree_all_reduce(size_t leaves, const std::vector<TreePartial>& parts,
                                         void* out, size_t count, DType dtype) {
  ENGINE_CHECK(leaves >= 1 && leaves <= kMaxLeaves, "chunk_tree_all_reduce on rank ", rank(),
               ": a tree of ", leaves, " leaves (1 to ", kMaxLeaves, ")");
  ENGINE_CHECK(out || count == 0, "chunk_tree_all_reduce on rank ", rank(), ": no output buffer");
  static_assert(kMaxLeaves <= size_t(std::numeric_limits<int32_t>::max()));
  run([&] {
    const CollContext c =
        call(CollOp::ChunkTree, count, dtype, ReduceOp::Sum, static_cast<int>(leaves));
    comm::chunk_tree_all_reduce(c, parts.data(), parts.size(), out);
  });
}

}  // namespace engine::comm
