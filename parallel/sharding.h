// parallel/sharding.h: this rank's shard of the training set, epoch by epoch: the tutorials'
// DataPartitioner (one fixed shard per rank, reshuffled by the loader each epoch) or PyTorch's
// DistributedSampler (the whole set reordered every epoch, then dealt out).
#pragma once
#include <cstdint>
#include <vector>

namespace engine::parallel {

struct ShardOptions {
  bool partition = true;   // DataPartitioner; false: DistributedSampler
  bool shuffle = true;     // a new order every epoch
  uint64_t seed = 1234;    // the sampler's and the loader's
  bool drop_last = false;  // the sampler: cut the set to a multiple of the world size
};

class RankShard {
 public:
  RankShard() = default;
  RankShard(const ShardOptions& o, int64_t n, int world, int rank);
  // This rank's sample indices for `epoch`, in the order the loader keeps (the sampler's) or
  // reshuffles (a partition's, when loader_shuffles()).
  std::vector<int64_t> indices(int64_t epoch) const;
  bool loader_shuffles() const { return o_.partition && o_.shuffle; }
  // Batches of `batch` in one epoch (the last one short), as the loader counts them.
  int64_t batches_per_epoch(int64_t batch) const;

 private:
  ShardOptions o_;
  int64_t n_ = 0;
  int world_ = 1, rank_ = 0;
  std::vector<int64_t> partition_;  // partition: this rank's shard
};

}  // namespace engine::parallel
