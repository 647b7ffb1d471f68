// parallel/sharding.cpp: see sharding.h.
#include "parallel/sharding.h"

#include "data/partition.h"
#include "data/sampler.h"

namespace engine::parallel {

RankShard::RankShard(const ShardOptions& o, int64_t n, int world, int rank)
    : o_(o), n_(n), world_(world), rank_(rank) {
  if (o_.partition) partition_ = data::partition_for_rank(n, world, rank, 1234);
}

std::vector<int64_t> RankShard::indices(int64_t epoch) const {
  if (o_.partition) return partition_;
  data::DistributedSampler sampler(n_, world_, rank_, o_.shuffle, o_.seed, o_.drop_last);
  sampler.set_epoch(epoch);
  return sampler.indices();
}

int64_t RankShard::batches_per_epoch(int64_t batch) const {
  const int64_t shard =
      o_.partition ? static_cast<int64_t>(partition_.size())
                   : data::DistributedSampler(n_, world_, rank_, o_.shuffle, o_.seed, o_.drop_last)
                         .num_samples();
  return (shard + batch - 1) / batch;
}

}  // namespace engine::parallel
