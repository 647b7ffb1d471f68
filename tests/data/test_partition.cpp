// Tests data/partition.h: the tutorials' DataPartitioner, checked against CPython 3.11.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/partition.h"

namespace engine::data {
namespace {

using V = std::vector<int64_t>;

TEST(DataPartitioner, TutorialExample) {
  // The tutorial: data 1..10, sizes [0.7, 0.2, 0.1], seed 1234.
  V data(10);
  std::iota(data.begin(), data.end(), 1);
  DataPartitioner p(data, {0.7, 0.2, 0.1}, 1234);
  ASSERT_EQ(p.num_partitions(), 3);
  EXPECT_EQ(p.use(0), (V{3, 9, 4, 6, 7, 5, 10}));
  EXPECT_EQ(p.use(1), (V{1, 2}));
  EXPECT_EQ(p.use(2), (V{8}));
  EXPECT_THROW(p.use(3), Error);
}

TEST(DataPartitioner, Shuffle60000FirstIndices) {
  // l=list(range(60000)); random.Random(1234).shuffle(l); print(l[:20], l[20000:20005],
  // l[40000:40005])
  DataPartitioner p(60000, equal_sizes(3), 1234);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(p.use(r).size(), 20000u);  // int(1/3 * 60000) == 20000
  EXPECT_EQ(V(p.use(0).begin(), p.use(0).begin() + 20),
            (V{33712, 36159, 45528, 25849, 53734, 40353, 32418, 55928, 38521, 21823,
               15630, 53486, 42658, 4899,  9832,  18628, 39371, 39211, 58610, 37514}));
  EXPECT_EQ(V(p.use(1).begin(), p.use(1).begin() + 5), (V{46791, 46755, 45882, 46519, 55504}));
  EXPECT_EQ(V(p.use(2).begin(), p.use(2).begin() + 5), (V{8798, 29810, 53941, 13381, 5961}));
  EXPECT_EQ(partition_for_rank(60000, 3, 2, 1234), p.use(2));
}

TEST(DataPartitioner, TruncatesLikePythonInt) {
  // int(0.57 * 100) == 56 (0.57 * 100 == 56.99999999999999), int(0.43 * 100) == 43; one left over.
  // l=list(range(100)); random.Random(5).shuffle(l); print(l[:28])  (first part starts the same)
  DataPartitioner p(100, {0.57, 0.43}, 5);
  EXPECT_EQ(p.use(0).size(), 56u);
  EXPECT_EQ(p.use(1).size(), 43u);
  EXPECT_EQ(V(p.use(0).begin(), p.use(0).begin() + 5), (V{91, 2, 30, 33, 58}));
  // int(1/7 * 60000) == 8571 for each of 7 parts; the 3 left over go nowhere.
  DataPartitioner seven(60000, equal_sizes(7), 1234);
  V all;
  for (int r = 0; r < 7; ++r) {
    EXPECT_EQ(seven.use(r).size(), 8571u);
    all.insert(all.end(), seven.use(r).begin(), seven.use(r).end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());  // disjoint
}

TEST(DataPartitioner, SizesPastOneGetWhatIsLeft) {
  // Python: indexes[0:part_len] of a shorter list is what is left.
  DataPartitioner p(10, {0.8, 0.5, 0.3}, 1);
  EXPECT_EQ(p.use(0).size(), 8u);
  EXPECT_EQ(p.use(1).size(), 2u);
  EXPECT_EQ(p.use(2).size(), 0u);
  EXPECT_THROW(DataPartitioner(10, {-0.1}, 1), Error);
  EXPECT_THROW(equal_sizes(0), Error);
  EXPECT_EQ(equal_sizes(4), (std::vector<double>{0.25, 0.25, 0.25, 0.25}));
}

}  // namespace
}  // namespace engine::data
