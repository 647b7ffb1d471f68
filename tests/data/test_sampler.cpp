// Tests data/shuffle.h and data/sampler.h (DistributedSampler's PyTorch semantics).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/sampler.h"
#include "data/shuffle.h"

namespace engine::data {
namespace {

using V = std::vector<int64_t>;

TEST(Shuffle, Mix64IsSplitmix64) {
  // splitmix64's first output from state 0 (the published reference value).
  EXPECT_EQ(mix64(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
}

TEST(Shuffle, GoldenPermutation) {
  // Pins the order (a checkpointed run must resume with the same shuffles). Values from an
  // independent Python transcription of hash_seed, xoshiro256**, Lemire and Fisher-Yates.
  EXPECT_EQ(hash_seed({42}), 7015204099787907898ull);
  V x(10);
  std::iota(x.begin(), x.end(), 0);
  shuffle_with_seed(x, 42);
  EXPECT_EQ(x, (V{9, 1, 4, 2, 8, 7, 6, 5, 3, 0}));
}

TEST(Shuffle, BelowIsRoughlyUniform) {
  ShuffleRng rng(7);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) {
    uint64_t v = rng.below(6);
    ASSERT_LT(v, 6u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
}

TEST(DistributedSampler, PadsByRepeatingAndStridesByRank) {
  // n = 10, W = 3, no shuffle: padded to 12 = [0..9, 0, 1]; rank r takes r, r+3, ...
  std::vector<V> want = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, /*shuffle=*/false);
    EXPECT_EQ(s.num_samples(), 4);
    EXPECT_EQ(s.total_size(), 12);
    EXPECT_EQ(s.indices(), want[r]) << "rank " << r;
  }
}

TEST(DistributedSampler, DropLastCutsToMultiple) {
  std::vector<V> want = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, false, 0, /*drop_last=*/true);
    EXPECT_EQ(s.num_samples(), 3);
    EXPECT_EQ(s.indices(), want[r]) << "rank " << r;
  }
  EXPECT_TRUE(DistributedSampler(2, 3, 0, false, 0, true).indices().empty());
}

TEST(DistributedSampler, PaddingLongerThanDatasetRepeats) {
  // n = 2, W = 5: padded [0, 1, 0, 1, 0] (PyTorch repeats the list ceil(3 / 2) times).
  V got;
  for (int r = 0; r < 5; ++r) {
    V idx = DistributedSampler(2, 5, r, false).indices();
    ASSERT_EQ(idx.size(), 1u);
    got.push_back(idx[0]);
  }
  EXPECT_EQ(got, (V{0, 1, 0, 1, 0}));
  EXPECT_TRUE(DistributedSampler(0, 4, 1, true).indices().empty());
}

TEST(DistributedSampler, ShuffledRanksPartitionOnePermutation) {
  const int64_t n = 103;
  const int w = 4;
  for (int64_t epoch : {0, 1}) {
    V merged(static_cast<size_t>(w * 26));
    for (int r = 0; r < w; ++r) {
      DistributedSampler s(n, w, r, true, 17);
      s.set_epoch(epoch);
      V idx = s.indices();
      ASSERT_EQ(idx.size(), 26u);
      for (size_t k = 0; k < idx.size(); ++k) merged[k * w + r] = idx[k];
    }
    // Positions 0..102 are a permutation; 103..103 repeat its start.
    V perm(merged.begin(), merged.begin() + n);
    V sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    V iota(n);
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(sorted, iota);
    EXPECT_EQ(merged[n], perm[0]);
    EXPECT_NE(perm, iota);
  }
}

TEST(DistributedSampler, EpochAndSeedChangeTheOrder) {
  DistributedSampler a(50, 2, 0, true, 3), b(50, 2, 0, true, 3);
  EXPECT_EQ(a.indices(), b.indices());
  a.set_epoch(1);
  EXPECT_NE(a.indices(), b.indices());
  b.set_epoch(1);
  EXPECT_EQ(a.indices(), b.indices());
  EXPECT_NE(DistributedSampler(50, 2, 0, true, 4).indices(),
            DistributedSampler(50, 2, 0, true, 3).indices());
  // seed + epoch, as PyTorch: (seed 3, epoch 1) == (seed 4, epoch 0).
  EXPECT_EQ(a.indices(), DistributedSampler(50, 2, 0, true, 4).indices());
  // seed 0, epoch 0, n 10, W 1: hash_seed({0}) Fisher-Yates (Python transcription).
  EXPECT_EQ(DistributedSampler(10, 1, 0, true, 0).indices(), (V{7, 8, 6, 5, 1, 4, 0, 9, 3, 2}));
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), Error);
  EXPECT_THROW(DistributedSampler(10, 2, 2), Error);
  EXPECT_THROW(DistributedSampler(10, 2, -1), Error);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), Error);
}

}  // namespace
}  // namespace engine::data
