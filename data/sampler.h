// data/sampler.h: DistributedSampler with torch.utils.data.distributed.DistributedSampler's
// semantics (shuffle per epoch, pad or drop to a multiple of the world size, rank striding).
#pragma once
#include <cstdint>
#include <vector>

namespace engine::data {

// The permutation differs from PyTorch's: torch.randperm(n, generator seeded seed + epoch) cannot
// be reproduced without PyTorch's CPU generator, so we Fisher-Yates 0..n-1 with our ShuffleRng
// seeded by hash_seed({seed + epoch}) (data/shuffle.h). Every rank computes the same permutation
// for the same (seed, epoch), which is what makes the shards disjoint. Everything else matches:
//   drop_last: the permutation is cut to floor(n / W) * W;
//   otherwise it is padded to ceil(n / W) * W by repeating it from the start (as many times as
//   needed when the padding exceeds n);
//   rank r takes positions r, r + W, r + 2W, ...
class DistributedSampler {
 public:
  DistributedSampler(int64_t n, int world, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // This rank's indices for the current epoch: num_samples() of them, each in 0..n-1.
  std::vector<int64_t> indices() const;
  int64_t num_samples() const { return num_samples_; }  // per rank
  int64_t total_size() const { return num_samples_ * world_; }

 private:
  int64_t n_;
  int world_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t num_samples_;
};

}  // namespace engine::data
