// parallel/sharding.cpp: see sharding.h.
#include "parallel/sharding.h"

#include <algorithm>

#include "core/chunk_tree.h"
#include "core/error.h"
#include "data/partition.h"
#include "data/sampler.h"

namespace engine::parallel {

RankShard::RankShard() = default;
RankShard::~RankShard() = default;
RankShard::RankShard(RankShard&&) noexcept = default;
RankShard& RankShard::operator=(RankShard&&) noexcept = default;

RankShard::RankShard(const ShardOptions& o, int64_t n, int world, int rank)
    : o_(o), n_(n), world_(world), rank_(rank) {
  if (o_.global_batch > 0) {
    const int64_t chunk = nn::ChunkPlan{}.chunk_size;
    ENGINE_CHECK(n >= o_.global_batch, "world-invariant order: the training set's ", n,
                 " images hold no full batch of ", o_.global_batch);
    const size_t chunks =
        chunk_tree::chunk_count(static_cast<size_t>(o_.global_batch), static_cast<size_t>(chunk));
    ENGINE_CHECK(static_cast<size_t>(world) <= chunks, "world-invariant order: a batch of ",
                 o_.global_batch, " images is ", chunks, " chunks of ", chunk, ", fewer than the ",
                 world, " ranks (each takes whole chunks): use --batch-size ", world * chunk,
                 " or more");
    order_ = std::make_unique<GlobalOrder>(n, o_.global_batch, chunk, o_.seed, o_.shuffle);
    return;
  }
  if (o_.partition) partition_ = data::partition_for_rank(n, world, rank, 1234);
}

int64_t RankShard::share() const {
  return order_ ? order_->positions(0, world_, rank_).second : 0;
}

std::optional<nn::ChunkPlan> RankShard::plan(int64_t b) const {
  if (!order_) return std::nullopt;
  return order_->plan(b, world_, rank_);
}

std::vector<int64_t> RankShard::indices(int64_t epoch) const {
  if (order_) {
    const std::vector<int64_t> order = order_->epoch_order(epoch);
    std::vector<int64_t> out;
    for (int64_t b = 0; b < n_ / o_.global_batch; ++b) {
      const std::vector<int64_t> mine = order_->indices(order, b, world_, rank_);
      out.insert(out.end(), mine.begin(), mine.end());
    }
    return out;
  }
  if (o_.partition) return partition_;
  data::DistributedSampler sampler(n_, world_, rank_, o_.shuffle, o_.seed, o_.drop_last);
  sampler.set_epoch(epoch);
  return sampler.indices();
}

int64_t RankShard::batches_per_epoch(int64_t batch) const {
  if (order_) return n_ / o_.global_batch;
  const int64_t shard =
      o_.partition ? static_cast<int64_t>(partition_.size())
                   : data::DistributedSampler(n_, world_, rank_, o_.shuffle, o_.seed, o_.drop_last)
                         .num_samples();
  return (shard + batch - 1) / batch;
}

GlobalOrder::GlobalOrder(int64_t n, int64_t batch, int64_t chunk_size, uint64_t seed, bool shuffle)
    : n_(n), batch_(batch), chunk_(chunk_size), seed_(seed), shuffle_(shuffle) {
  ENGINE_CHECK(n > 0 && batch > 0 && chunk_size > 0, "global order: a set of ", n,
               " samples in batches of ", batch, " and chunks of ", chunk_size);
}

std::vector<int64_t> GlobalOrder::epoch_order(int64_t epoch) const {
  // One process's sampler: its order depends on the seed and the epoch, never on the world.
  data::DistributedSampler sampler(n_, 1, 0, shuffle_, seed_, false);
  sampler.set_epoch(epoch);
  return sampler.indices();
}

int64_t GlobalOrder::batch_size(int64_t b) const {
  ENGINE_CHECK(b >= 0 && b < batches_per_epoch(), "global order: batch ", b, " of ",
               batches_per_epoch());
  return std::min(batch_, n_ - b * batch_);
}

nn::ChunkPlan GlobalOrder::plan(int64_t b, int world, int rank) const {
  const auto size = static_cast<size_t>(batch_size(b));
  const chunk_tree::Range r = chunk_tree::rank_chunks(
      chunk_tree::chunk_count(size, static_cast<size_t>(chunk_)), world, rank);
  return {chunk_, static_cast<int64_t>(size), static_cast<int64_t>(r.begin)};
}

std::pair<int64_t, int64_t> GlobalOrder::positions(int64_t b, int world, int rank) const {
  const auto size = static_cast<size_t>(batch_size(b)), c = static_cast<size_t>(chunk_);
  const chunk_tree::Range r =
      chunk_tree::rank_chunks(chunk_tree::chunk_count(size, c), world, rank);
  const size_t begin = chunk_tree::chunk_samples(size, c, r.begin).begin;
  const size_t end = chunk_tree::chunk_samples(size, c, r.end - 1).end;
  return {b * batch_ + static_cast<int64_t>(begin), static_cast<int64_t>(end - begin)};
}

std::vector<int64_t> GlobalOrder::indices(const std::vector<int64_t>& order, int64_t b, int world,
                                          int rank) const {
  ENGINE_CHECK(static_cast<int64_t>(order.size()) == n_, "global order: an order of ", order.size(),
               " samples for a set of ", n_);
  const auto [begin, count] = positions(b, world, rank);
  return {order.begin() + begin, order.begin() + begin + count};
}

}  // namespace engine::parallel
