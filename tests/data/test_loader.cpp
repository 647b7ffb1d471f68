// Tests data/batch.h and data/loader.h over an in-memory split whose pixels name their sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "data/batch.h"
#include "data/loader.h"

namespace engine::data {
namespace {

using V = std::vector<int64_t>;

// Sample i: pixel 0 is i (so a batch row names its sample), pixel j is (i + 11 j) % 256.
MnistSplit fake_split(int64_t n, int64_t rows = 2, int64_t cols = 3) {
  MnistSplit s;
  s.images_path = "fake-images";
  s.labels_path = "fake-labels";
  s.count = n;
  s.rows = rows;
  s.cols = cols;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < rows * cols; ++j)
      s.images.push_back(static_cast<uint8_t>((i + 11 * j) % 256));
    s.labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return s;
}

// The samples of a batch, recovered from pixel 0; checks every pixel and label on the way.
V samples_of(const MnistSplit& s, const Batch& b) {
  const int64_t numel = s.rows * s.cols;
  EXPECT_EQ(b.images.size(), static_cast<size_t>(b.size * numel));
  EXPECT_EQ(b.labels.size(), static_cast<size_t>(b.size));
  V out;
  for (int64_t k = 0; k < b.size; ++k) {
    int64_t i = -1;
    for (int v = 0; v < 256; ++v) {
      if (b.images[k * numel] == normalize_pixel(static_cast<uint8_t>(v))) i = v;
    }
    for (int64_t j = 0; j < numel; ++j) {
      EXPECT_EQ(b.images[k * numel + j], normalize_pixel(s.images[i * numel + j]));
    }
    EXPECT_EQ(b.labels[k], i % 10);
    out.push_back(i);
  }
  return out;
}

std::vector<Batch> run_epoch(BatchLoader& l, int64_t epoch) {
  l.start_epoch(epoch);
  std::vector<Batch> out;
  Batch b;
  while (l.next(&b)) out.push_back(b);
  return out;
}

V odd_shard(int64_t n) {
  V shard;
  for (int64_t i = 1; i < n; i += 2) shard.push_back(i);
  return shard;
}

TEST(Normalize, MatchesTorchvisionFloat32) {
  // struct-emulated float32: f32(f32(f32(v / 255) - f32(0.1307)) / f32(0.3081))
  EXPECT_EQ(normalize_pixel(0), -0.4242129623889923f);
  EXPECT_EQ(normalize_pixel(1), -0.4114847183227539f);
  EXPECT_EQ(normalize_pixel(128), 1.2050011157989502f);
  EXPECT_EQ(normalize_pixel(255), 2.821486711502075f);
  uint8_t src[3] = {0, 255, 128};
  float dst[3];
  normalize_into(src, dst, 3);
  EXPECT_EQ(dst[1], 2.821486711502075f);
  EXPECT_EQ(dst[2], 1.2050011157989502f);
}

TEST(Batch, ContiguousCoversTheSplit) {
  MnistSplit s = fake_split(20);
  Batch all = contiguous_batch(s, 0, s.count);
  V want(20);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(samples_of(s, all), want);
  EXPECT_EQ(samples_of(s, contiguous_batch(s, 5, 8)), (V{5, 6, 7}));
  EXPECT_EQ(contiguous_batch(s, 20, 20).size, 0);
  EXPECT_THROW(contiguous_batch(s, 15, 21), Error);
}

TEST(BatchLoader, CoversShardOnceInOrderWithoutShuffle) {
  MnistSplit s = fake_split(75);
  V shard = odd_shard(75);  // 37 samples
  BatchLoader l(s, shard, 8, /*shuffle=*/false, /*drop_last=*/false, 1, 0);
  EXPECT_EQ(l.batches_per_epoch(), 5);
  std::vector<Batch> batches = run_epoch(l, 0);
  ASSERT_EQ(batches.size(), 5u);
  V seen;
  for (size_t k = 0; k < batches.size(); ++k) {
    EXPECT_EQ(batches[k].size, k < 4 ? 8 : 5);
    EXPECT_EQ(batches[k].rows, 2);
    EXPECT_EQ(batches[k].cols, 3);
    V got = samples_of(s, batches[k]);
    seen.insert(seen.end(), got.begin(), got.end());
  }
  EXPECT_EQ(seen, shard);
  Batch b;
  EXPECT_FALSE(l.next(&b));
  EXPECT_FALSE(l.next(&b));
}

TEST(BatchLoader, ShuffledEpochCoversShardExactlyOnce) {
  MnistSplit s = fake_split(75);
  V shard = odd_shard(75);
  BatchLoader l(s, shard, 8, true, false, 1, 0);
  for (int64_t epoch : {0, 1, 2}) {
    V seen;
    for (const Batch& b : run_epoch(l, epoch)) {
      V got = samples_of(s, b);
      seen.insert(seen.end(), got.begin(), got.end());
    }
    EXPECT_NE(seen, shard) << "epoch " << epoch << " was not shuffled";
    EXPECT_EQ(seen, l.epoch_order());
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, shard) << "epoch " << epoch;
  }
}

TEST(BatchLoader, DropLastDropsThePartialBatch) {
  MnistSplit s = fake_split(75);
  V shard = odd_shard(75);
  BatchLoader l(s, shard, 8, true, /*drop_last=*/true, 1, 0);
  EXPECT_EQ(l.batches_per_epoch(), 4);
  std::vector<Batch> batches = run_epoch(l, 0);
  ASSERT_EQ(batches.size(), 4u);
  V seen;
  for (const Batch& b : batches) {
    EXPECT_EQ(b.size, 8);
    V got = samples_of(s, b);
    seen.insert(seen.end(), got.begin(), got.end());
  }
  EXPECT_EQ(seen, V(l.epoch_order().begin(), l.epoch_order().begin() + 32));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  BatchLoader small(s, V{1, 2, 3}, 8, false, true, 1, 0);
  EXPECT_EQ(small.batches_per_epoch(), 0);
  EXPECT_TRUE(run_epoch(small, 0).empty());
}

bool same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].size != b[k].size || a[k].labels != b[k].labels) return false;
    if (std::memcmp(a[k].images.data(), b[k].images.data(), a[k].images.size() * sizeof(float)))
      return false;
  }
  return true;
}

TEST(BatchLoader, DeterministicAcrossLoadersAndPrefetchDepths) {
  MnistSplit s = fake_split(200);
  V shard(200);
  std::iota(shard.begin(), shard.end(), 0);
  BatchLoader a(s, shard, 16, true, false, 7, 3, /*prefetch=*/2);
  BatchLoader b(s, shard, 16, true, false, 7, 3, /*prefetch=*/0);
  BatchLoader c(s, shard, 16, true, false, 7, 3, /*prefetch=*/5);
  std::vector<Batch> ea = run_epoch(a, 4);
  EXPECT_TRUE(same(ea, run_epoch(b, 4)));
  EXPECT_TRUE(same(ea, run_epoch(c, 4)));
  EXPECT_TRUE(same(ea, run_epoch(a, 4)));  // the same epoch again
  EXPECT_FALSE(same(ea, run_epoch(a, 5)));
  EXPECT_EQ(BatchLoader::epoch_seed(7, 3, 1), 2668427074254719364ull);  // Python transcription
}

TEST(BatchLoader, RanksAndSeedsGetDifferentOrders) {
  MnistSplit s = fake_split(200);
  V shard(200);
  std::iota(shard.begin(), shard.end(), 0);
  BatchLoader r0(s, shard, 16, true, false, 7, 0), r1(s, shard, 16, true, false, 7, 1);
  BatchLoader other_seed(s, shard, 16, true, false, 8, 0);
  r0.start_epoch(0);
  r1.start_epoch(0);
  other_seed.start_epoch(0);
  EXPECT_NE(r0.epoch_order(), r1.epoch_order());
  EXPECT_NE(r0.epoch_order(), other_seed.epoch_order());
  // (seed 7, rank 1) must not be (seed 8, rank 0), the seed + rank slip.
  EXPECT_NE(r1.epoch_order(), other_seed.epoch_order());
}

TEST(BatchLoader, RestartMidEpochAndEarlyDestruction) {
  MnistSplit s = fake_split(200);
  V shard(200);
  std::iota(shard.begin(), shard.end(), 0);
  BatchLoader fresh(s, shard, 4, true, false, 9, 0);
  std::vector<Batch> want = run_epoch(fresh, 1);
  BatchLoader l(s, shard, 4, true, false, 9, 0, /*prefetch=*/3);
  l.start_epoch(0);
  Batch b;
  ASSERT_TRUE(l.next(&b));
  EXPECT_TRUE(same(run_epoch(l, 1), want));  // leftovers of epoch 0 are discarded

  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < 50; ++k) {
    BatchLoader early(s, shard, 4, true, false, 9, 0, 2);
    early.start_epoch(0);
    if (k % 2) {
      ASSERT_TRUE(early.next(&b));
    }
  }  // each destructor joins a worker that may be mid-batch or waiting for room
  { BatchLoader never_started(s, shard, 4, true, false, 9, 0); }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(BatchLoader, Errors) {
  MnistSplit s = fake_split(10);
  BatchLoader l(s, V{1, 2}, 4, false, false, 0, 0);
  Batch b;
  try {
    l.next(&b);
    FAIL() << "next() before start_epoch() did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("start_epoch"), std::string::npos) << e.what();
  }
  try {
    BatchLoader bad(s, V{1, 10}, 4, false, false, 0, 2);
    FAIL() << "out-of-range shard index accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("index 10 at position 1"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 2"), std::string::npos) << m;
  }
  EXPECT_THROW(BatchLoader(s, V{1}, 0, false, false, 0, 0), Error);
}

// next() waits at most the timeout for the prefetch thread, then throws TimeoutError naming the
// rank, the epoch and the batch; the batch still comes to a later next().
TEST(BatchLoader, NextTimesOutNamingRankEpochAndBatchThenGoesOn) {
  constexpr int64_t n = 4096;  // 4096 images of 28 x 28: one batch takes the worker milliseconds
  const MnistSplit s = fake_split(n, 28, 28);
  V idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  BatchLoader l(s, idx, n, false, false, 0, 3, 1);
  l.set_next_timeout(std::chrono::milliseconds(1));
  Batch b;
  std::string message;
  // The worker may win the race on an attempt; it cannot win fifty in a row.
  for (int attempt = 0; attempt < 50 && message.empty(); ++attempt) {
    l.start_epoch(7);
    try {
      l.next(&b);
    } catch (const TimeoutError& e) {
      message = e.what();
    }
  }
  ASSERT_FALSE(message.empty()) << "next() never timed out";
  EXPECT_NE(message.find("BatchLoader (rank 3, epoch 7): waited 1 ms"), std::string::npos)
      << message;
  EXPECT_NE(message.find("batch 0 of 1"), std::string::npos) << message;
  l.set_next_timeout(std::chrono::seconds(60));
  ASSERT_TRUE(l.next(&b));
  EXPECT_EQ(b.size, n);
  EXPECT_FALSE(l.next(&b));
}

}  // namespace
}  // namespace engine::data
