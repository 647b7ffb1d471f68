// tests/comm/test_ipc_peers.cpp: issue 14, finding 8: the CUDA IPC ring asks P2P only of its two
// ring neighbours' GPUs (comm/backends/cuda_ipc/ipc_peers.h), not of every GPU the process sees.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/backends/cuda_ipc/ipc_peers.h"
#include "tests/common/expect_error.h"

namespace engine::comm {
namespace {

std::vector<std::string> gpus(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(std::string(15, 'g') + static_cast<char>('A' + i));
  return v;
}

std::vector<std::pair<int, int>> pairs(const std::vector<RingPeer>& ps) {
  std::vector<std::pair<int, int>> out;
  for (const RingPeer& p : ps) out.emplace_back(p.rank, p.device);
  return out;
}

using Pairs = std::vector<std::pair<int, int>>;

TEST(RingPeers, OnlyTheTwoNeighboursOfEightGpus) {
  const auto g = gpus(8);  // rank r on GPU r, every GPU visible to every rank
  EXPECT_EQ(pairs(ring_peers_to_check(0, 8, 0, g, g)), (Pairs{{7, 7}, {1, 1}}));
  EXPECT_EQ(pairs(ring_peers_to_check(5, 8, 5, g, g)), (Pairs{{4, 4}, {6, 6}}));
  EXPECT_EQ(pairs(ring_peers_to_check(7, 8, 7, g, g)), (Pairs{{6, 6}, {0, 0}}));
}

TEST(RingPeers, TwoRanksHaveOneNeighbourOneRankNone) {
  const auto g = gpus(2);
  EXPECT_EQ(pairs(ring_peers_to_check(0, 2, 0, g, g)), (Pairs{{1, 1}}));
  EXPECT_EQ(pairs(ring_peers_to_check(1, 2, 1, g, g)), (Pairs{{0, 0}}));
  EXPECT_TRUE(ring_peers_to_check(0, 1, 0, {g[0]}, g).empty());
}

TEST(RingPeers, ASharedGpuNeedsNoP2P) {
  const auto g = gpus(1);
  EXPECT_TRUE(ring_peers_to_check(0, 2, 0, {g[0], g[0]}, g).empty());
  EXPECT_TRUE(ring_peers_to_check(1, 3, 0, {g[0], g[0], g[0]}, g).empty());
}

TEST(RingPeers, AGpuThisProcessDoesNotSeeIsLeftToTheDriver) {
  // CUDA_VISIBLE_DEVICES per rank: each rank sees its own GPU alone, as cuda:0.
  const auto g = gpus(4);
  EXPECT_TRUE(ring_peers_to_check(2, 4, 0, g, {g[2]}).empty());
  // Ranks on GPUs 4..7 of a host where this process sees all 8: indices follow the UUIDs.
  const auto all = gpus(8);
  const std::vector<std::string> ranks{all[4], all[5], all[6], all[7]};
  EXPECT_EQ(pairs(ring_peers_to_check(1, 4, 5, ranks, all)), (Pairs{{0, 4}, {2, 6}}));
}

TEST(RingPeers, BadArgumentsNameThem) {
  testing::expect_error([] { ring_peers_to_check(3, 2, 0, gpus(2), gpus(2)); },
                        {"ring_peers_to_check: rank 3 of 2"});
}

}  // namespace
}  // namespace engine::comm
