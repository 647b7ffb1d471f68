// tests/comm/test_ring_schedule.cpp: the pure ring schedule, checked symbolically: every chunk is
// sent by the left neighbour of its receiver at the same step, the reduce-scatter phase leaves each
// rank owning a chunk that holds every rank's contribution exactly once, and the all-gather phase
// gives every rank every finished chunk.
#include <gtest/gtest.h>

#include <set>

#include "comm/algorithms/ring_schedule.h"

namespace engine::comm {
namespace {

TEST(RingSchedule, ChunksCoverTheBufferWithRemaindersFirst) {
  for (int W = 1; W <= 8; ++W)
    for (size_t n : {size_t(0), size_t(1), size_t(W - 1), size_t(W + 1), size_t(1013)}) {
      RingSchedule s(0, W, n);
      size_t next = 0;
      for (int c = 0; c < W; ++c) {
        Range r = s.chunk(c);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.size(), s.max_chunk());
        EXPECT_GE(r.size() + 1, s.max_chunk());
        if (c > 0) {
          EXPECT_LE(r.size(), s.chunk(c - 1).size());
        }
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
  RingSchedule s(0, 3, 7);
  EXPECT_EQ(s.chunk(0).size(), 3u);
  EXPECT_EQ(s.chunk(1).size(), 2u);
  EXPECT_EQ(s.chunk(2).size(), 2u);
}

TEST(RingSchedule, SegmentsCoverEachChunk) {
  RingSchedule s(1, 4, 1013);
  for (size_t seg : {size_t(1), size_t(7), size_t(100), size_t(1000)}) {
    const size_t n = s.segments(seg);
    for (int c = 0; c < 4; ++c) {
      size_t next = s.chunk(c).begin;
      for (size_t k = 0; k < n; ++k) {
        Range r = s.segment(c, k, seg);
        if (r.size()) {
          EXPECT_EQ(r.begin, next);
        }
        next = std::max(next, r.end);
      }
      EXPECT_EQ(next, s.chunk(c).end);
    }
  }
}

// Simulates the ring on sets of contributions.
void simulate(int W, int shift, bool check_allgather) {
  std::vector<RingSchedule> s;
  for (int r = 0; r < W; ++r) s.emplace_back(r, W, 100, shift);
  // have[r][c] = ranks whose contribution rank r holds in its chunk c
  std::vector<std::vector<std::multiset<int>>> have(W, std::vector<std::multiset<int>>(W));
  for (int r = 0; r < W; ++r)
    for (int c = 0; c < W; ++c) have[r][c] = {r};
  for (int step = 0; step < W - 1; ++step) {
    auto before = have;
    for (int r = 0; r < W; ++r) {
      int c = s[r].recv_chunk(RingPhase::ReduceScatter, step);
      int left = s[r].left();
      ASSERT_EQ(s[left].send_chunk(RingPhase::ReduceScatter, step), c);
      for (int x : before[left][c]) have[r][c].insert(x);
    }
  }
  std::set<int> owned;
  for (int r = 0; r < W; ++r) {
    int o = s[r].owned_chunk();
    owned.insert(o);
    std::multiset<int> all;
    for (int q = 0; q < W; ++q) all.insert(q);
    EXPECT_EQ(have[r][o], all) << "W=" << W << " rank " << r;
    if (shift == -1) {
      EXPECT_EQ(o, r);
    }
  }
  EXPECT_EQ(owned.size(), static_cast<size_t>(W));
  if (!check_allgather) return;
  std::vector<std::set<int>> done(W);
  for (int r = 0; r < W; ++r) done[r] = {s[r].owned_chunk()};
  for (int step = 0; step < W - 1; ++step) {
    auto before = done;
    for (int r = 0; r < W; ++r) {
      int c = s[r].recv_chunk(RingPhase::AllGather, step);
      int left = s[r].left();
      ASSERT_EQ(s[left].send_chunk(RingPhase::AllGather, step), c);
      ASSERT_TRUE(before[left].count(c)) << "rank " << left << " sends a chunk it lacks";
      done[r].insert(c);
    }
  }
  for (int r = 0; r < W; ++r) EXPECT_EQ(done[r].size(), static_cast<size_t>(W));
}

TEST(RingSchedule, ReduceScatterThenAllGatherIsComplete) {
  for (int W = 1; W <= 9; ++W) {
    simulate(W, 0, true);
    simulate(W, -1, true);
  }
}

}  // namespace
}  // namespace engine::comm
