// parallel/sharding.h: this rank's shard of the training set, epoch by epoch: the tutorials'
// DataPartitioner (one fixed shard per rank, reshuffled by the loader each epoch) or PyTorch's
// DistributedSampler (the whole set reordered every epoch, then dealt out).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "nn/chunked.h"

namespace engine::parallel {

struct ShardOptions {
  bool partition = true;   // DataPartitioner; false: DistributedSampler
  bool shuffle = true;     // a new order every epoch
  uint64_t seed = 1234;    // the sampler's and the loader's
  bool drop_last = false;  // the sampler: cut the set to a multiple of the world size
  // > 0: the world-invariant order (GlobalOrder below) in global batches of this many images,
  // the epoch's last, short batch dropped (it could leave a rank without a chunk); 0: off.
  int64_t global_batch = 0;
};

class GlobalOrder;

class RankShard {
 public:
  RankShard();
  // Throws engine::Error when the world-invariant order cannot be cut (no full batch in the set,
  // fewer chunks in a batch than ranks).
  RankShard(const ShardOptions& o, int64_t n, int world, int rank);
  ~RankShard();
  RankShard(RankShard&&) noexcept;
  RankShard& operator=(RankShard&&) noexcept;
  // This rank's sample indices for `epoch`, in the order the loader keeps (the sampler's and the
  // world-invariant order's: its share of each global batch in turn) or reshuffles (a
  // partition's, when loader_shuffles()).
  std::vector<int64_t> indices(int64_t epoch) const;
  bool loader_shuffles() const { return o_.partition && o_.shuffle && !order_; }
  // Batches of `batch` in one epoch (the last one short), as the loader counts them; in the
  // world-invariant order, the full global batches (batch: this rank's share()).
  int64_t batches_per_epoch(int64_t batch) const;
  // The world-invariant order: this rank's images of every global batch, and its chunk plan for
  // batch b (nn/chunked.h); 0 and none otherwise.
  int64_t share() const;
  std::optional<nn::ChunkPlan> plan(int64_t b) const;

 private:
  ShardOptions o_;
  int64_t n_ = 0;
  int world_ = 1, rank_ = 0;
  std::vector<int64_t> partition_;      // partition: this rank's shard
  std::unique_ptr<GlobalOrder> order_;  // the world-invariant order
};

// The world-invariant data order (issue 35): one seeded permutation of the set per epoch, the
// same at every world size; global batch b is its positions [b * B, (b + 1) * B) (the last one
// short), cut into chunks, and rank r of W takes the samples of its whole chunks of that batch
// (chunk_tree::rank_chunks). A batch of fewer chunks than ranks is refused with one line.
// RankShard with ShardOptions::global_batch feeds it to the loader.
class GlobalOrder {
 public:
  GlobalOrder(int64_t n, int64_t batch, int64_t chunk_size, uint64_t seed, bool shuffle = true);
  // The epoch's permutation of [0, n).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  int64_t batches_per_epoch() const { return (n_ + batch_ - 1) / batch_; }
  // Rank's part of global batch b: the chunk plan its step sets (nn/chunked.h).
  nn::ChunkPlan plan(int64_t b, int world, int rank) const;
  // The positions of batch b that rank takes, in the epoch's order: [begin, begin + count).
  std::pair<int64_t, int64_t> positions(int64_t b, int world, int rank) const;
  // The sample indices of rank's share of batch b in epoch `epoch` (order: epoch_order(epoch)).
  std::vector<int64_t> indices(const std::vector<int64_t>& order, int64_t b, int world,
                               int rank) const;

 private:
  int64_t batch_size(int64_t b) const;  // the samples of global batch b
  int64_t n_, batch_, chunk_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace engine::parallel
