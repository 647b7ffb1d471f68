// Regrouping after a lost rank (comm/rendezvous/membership.h), its members as threads over one
// MemStore; and the lost ranks read from a verdict (comm/health/blame.h).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "comm/health/blame.h"
#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/membership.h"

namespace engine::comm {
namespace {

using Clock = std::chrono::steady_clock;

struct Outcome {
  Membership m;
  std::string error;
  double seconds = 0;
};

// Members `ids` of `old` regroup at once, each having completed steps[i] and seen `lost`.
std::vector<Outcome> regroup_all(Store& store, const Membership& old, const std::vector<int>& ids,
                                 const std::vector<int64_t>& steps, const std::vector<int>& lost,
                                 Millis timeout) {
  std::vector<Outcome> out(ids.size());
  std::vector<std::thread> ts;
  for (size_t i = 0; i < ids.size(); ++i)
    ts.emplace_back([&, i] {
      Membership me = old;
      me.rank =
          static_cast<int>(std::find(old.ids.begin(), old.ids.end(), ids[i]) - old.ids.begin());
      const auto t0 = Clock::now();
      try {
        out[i].m = regroup(store, me, steps[i], lost, timeout);
      } catch (const Error& e) {
        out[i].error = e.what();
      }
      out[i].seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  for (auto& t : ts) t.join();
  return out;
}

TEST(Membership, SurvivorsAgreeAtOnceWhenTheLostRankIsNamed) {
  MemStore store;
  const Membership g0 = initial_membership(0, 4);
  const auto out = regroup_all(store, g0, {0, 1, 3}, {41, 42, 41}, {2}, Millis(20000));
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i].error, "") << i;
    EXPECT_EQ(out[i].m.generation, 1);
    EXPECT_EQ(out[i].m.ids, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(out[i].m.rank, static_cast<int>(i));
    EXPECT_EQ(out[i].m.furthest(), 42);
    EXPECT_EQ(out[i].m.source(), 1);  // the member that completed step 42
    EXPECT_EQ(out[i].m.lost_since(g0), std::vector<int>{2});
    EXPECT_LT(out[i].seconds, 5.0);  // not the timeout: rank 2 was seen lost
  }
}

TEST(Membership, AnUnnamedMissingRankIsLeftOutAtTheTimeout) {
  MemStore store;
  const Membership g0 = initial_membership(0, 3);
  const auto t0 = Clock::now();
  const auto out = regroup_all(store, g0, {0, 2}, {5, 5}, {}, Millis(300));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.29);
  for (const Outcome& o : out) {
    ASSERT_EQ(o.error, "");
    EXPECT_EQ(o.m.ids, (std::vector<int>{0, 2}));
  }
}

TEST(Membership, ALateMemberIsFenced) {
  MemStore store;
  const Membership g0 = initial_membership(0, 3);
  const auto out = regroup_all(store, g0, {0, 1}, {7, 7}, {2}, Millis(20000));
  ASSERT_EQ(out[0].error, "");
  ASSERT_EQ(out[0].m.ids, (std::vector<int>{0, 1}));
  // Rank 2 comes back (SIGCONT) and tries to join the generation that went on without it.
  Membership late = g0;
  late.rank = 2;
  try {
    regroup(store, late, 7, {}, Millis(2000));
    FAIL() << "a fenced member joined";
  } catch (const FencedError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 was fenced: generation 1 went on without it"),
              std::string::npos)
        << e.what();
  }
}

TEST(Membership, GenerationsFollowEachOther) {
  MemStore store;
  const Membership g0 = initial_membership(0, 4);
  const auto g1 = regroup_all(store, g0, {0, 2, 3}, {10, 10, 10}, {1}, Millis(20000));
  ASSERT_EQ(g1[0].error, "");
  const auto g2 = regroup_all(store, g1[0].m, {0, 3}, {20, 20}, {2}, Millis(20000));
  for (const Outcome& o : g2) {
    ASSERT_EQ(o.error, "");
    EXPECT_EQ(o.m.generation, 2);
    EXPECT_EQ(o.m.ids, (std::vector<int>{0, 3}));
    EXPECT_EQ(o.m.lost_since(g1[0].m), std::vector<int>{2});
  }
  EXPECT_EQ(g2[1].m.rank, 1);
}

TEST(Membership, ABrokenDecisionInTheStoreIsNamed) {
  MemStore store;
  store.add("elastic/1/closer", 1);  // someone else closes...
  store.set("elastic/1/members", "0:x");
  Membership g0 = initial_membership(0, 2);
  try {
    regroup(store, g0, 1, {}, Millis(1000));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation 1's members"), std::string::npos) << e.what();
  }
}

TEST(Membership, NoDecisionTimesOutNamingTheCloser) {
  MemStore store;
  store.add("elastic/1/closer", 1);  // a closer that died before it published
  Membership g0 = initial_membership(1, 2);
  EXPECT_THROW(regroup(store, g0, 1, {}, Millis(200)), TimeoutError);
}

TEST(BlamedRanks, ReadFromVerdictsAndErrors) {
  EXPECT_EQ(blamed_ranks("rank 0: rank 2 is gone (its process exited; health check: refused)"),
            std::vector<int>{2});
  EXPECT_EQ(blamed_ranks("rank 3 is frozen (...); rank 1 is unreachable (...) (found by rank 0)"),
            (std::vector<int>{1, 3}));
  EXPECT_EQ(blamed_ranks("rank 4 is alive but not progressing (its last ...)"), std::vector<int>{});
  EXPECT_EQ(blamed_ranks("rank 1 is cut off: it cannot reach any other rank"), std::vector<int>{});
  EXPECT_EQ(blamed_ranks("rank 0: timed out after 5 s waiting for rank 1"), std::vector<int>{});
}

}  // namespace
}  // namespace engine::comm
