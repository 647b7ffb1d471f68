// data/sampler.cpp: DistributedSampler.
#include "data/sampler.h"

#include "core/error.h"
#include "data/shuffle.h"

namespace engine::data {

DistributedSampler::DistributedSampler(int64_t n, int world, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), world_(world), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  ENGINE_CHECK(n >= 0, "DistributedSampler: dataset size must be >= 0, got ", n);
  ENGINE_CHECK(world >= 1, "DistributedSampler: world size must be >= 1, got ", world);
  ENGINE_CHECK(rank >= 0 && rank < world, "DistributedSampler: rank ", rank,
               " out of range for world size ", world);
  num_samples_ = drop_last ? n / world : (n + world - 1) / world;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) order[i] = i;
  // seed + epoch as PyTorch does (wrapping like the uint64 it is), then hashed for our generator.
  if (shuffle_) shuffle_with_seed(order, hash_seed({seed_ + static_cast<uint64_t>(epoch_)}));
  const int64_t total = total_size();
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  // Position p of the padded list is order[p % n]: repeating from the start covers any padding.
  for (int64_t p = rank_; p < total; p += world_) mine.push_back(order[p % n_]);
  return mine;
}

}  // namespace engine::data
