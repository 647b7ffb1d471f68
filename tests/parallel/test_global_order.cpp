// tests/parallel/test_global_order.cpp: the world-invariant data order (parallel/sharding.h): one
// seeded permutation per epoch; at every world size the ranks' shares of a global batch, in rank
// order, are that batch's positions of the permutation, each share whole chunks, and its chunk plan
// names the share's first chunk.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "parallel/sharding.h"

namespace engine::parallel {
namespace {

TEST(GlobalOrder, OnePermutationPerEpoch) {
  const GlobalOrder order(1000, 128, 16, 7);
  const std::vector<int64_t> e0 = order.epoch_order(0), e1 = order.epoch_order(1);
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, GlobalOrder(1000, 128, 16, 7).epoch_order(0));
  EXPECT_NE(e0, GlobalOrder(1000, 128, 16, 8).epoch_order(0));
  EXPECT_EQ(order.batches_per_epoch(), 8);
}

// Every rank's share of every batch, concatenated in rank order, is the batch itself.
void expect_shares_tile(int64_t n, int64_t batch, const std::vector<int>& worlds) {
  const GlobalOrder order(n, batch, 16, 3);
  const std::vector<int64_t> perm = order.epoch_order(2);
  for (int64_t b = 0; b < order.batches_per_epoch(); ++b) {
    const int64_t begin = b * batch, end = std::min(n, begin + batch);
    const std::vector<int64_t> want(perm.begin() + begin, perm.begin() + end);
    for (int w : worlds) {
      std::vector<int64_t> got;
      for (int r = 0; r < w; ++r) {
        const auto [pos, count] = order.positions(b, w, r);
        const nn::ChunkPlan plan = order.plan(b, w, r);
        EXPECT_EQ(pos - begin, plan.first_sample()) << "batch " << b << " W " << w << " rank " << r;
        EXPECT_EQ(plan.global_batch, end - begin);
        EXPECT_TRUE(count % 16 == 0 || pos + count == end) << "a share of part chunks";
        const std::vector<int64_t> mine = order.indices(perm, b, w, r);
        got.insert(got.end(), mine.begin(), mine.end());
      }
      EXPECT_EQ(got, want) << "batch " << b << " W " << w;
    }
  }
}

TEST(GlobalOrder, RanksTakeWholeChunksOfTheSameBatches) {
  expect_shares_tile(1000, 128, {1, 2, 3, 4});   // the last batch: 104 samples, 7 chunks
  expect_shares_tile(664, 96, {1, 2, 3, 4, 6});  // the last: 88 samples, its last chunk 8
}

TEST(GlobalOrder, RefusesMoreRanksThanChunks) {
  const GlobalOrder order(1000, 128, 16, 3);
  EXPECT_NO_THROW(order.plan(0, 8, 7));
  EXPECT_THROW(order.plan(7, 8, 7), Error);  // 104 samples: 7 chunks for 8 ranks
  EXPECT_THROW(order.plan(8, 1, 0), Error);  // no batch 8
}

}  // namespace
}  // namespace engine::parallel
