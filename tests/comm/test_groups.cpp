// tests/comm/test_groups.cpp: Communicator::split - every collective inside groups of several
// colorings for W = 1..9 (ranks as threads), groups' messages kept apart from the parent's, groups
// across processes - and the two-level all_reduce against the flat ring.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/netns_hosts.h"

namespace engine::comm {
namespace {

using testing::expect_no_errors;
using testing::fval;
using testing::run_threads;

// The first wrong result of a rank ("" = none); the rank goes on with every collective.
struct Wrong {
  std::string first;
  void note(bool ok, const std::string& what) {
    if (!ok && first.empty()) first = what;
  }
};

// Every collective of g (members[g rank] = parent rank) on values of the parent ranks.
void check_group(Communicator& g, const std::vector<int>& members, Wrong& w) {
  const int G = g.size(), gr = g.rank(), me = members[gr];
  for (size_t n : {size_t(1), size_t(G + 1), size_t(1013)}) {
    const std::string at = " G=" + std::to_string(G) + " n=" + std::to_string(n);
    std::vector<float> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = fval(me, i);
    g.all_reduce(b.data(), n, DType::F32, ReduceOp::Sum);
    for (size_t i = 0; i < n; ++i) {
      float e = 0;
      for (int p : members) e += fval(p, i);
      w.note(b[i] == e, "all_reduce" + at);
    }
    for (int root = 0; root < G; ++root) {
      for (size_t i = 0; i < n; ++i) b[i] = fval(me, i);
      g.broadcast(b.data(), n, DType::F32, root);
      w.note(b[n - 1] == fval(members[root], n - 1), "broadcast" + at);
      for (size_t i = 0; i < n; ++i) b[i] = fval(me, i);
      g.reduce(b.data(), n, DType::F32, ReduceOp::Max, root);
      if (gr == root) {
        int top = *std::max_element(members.begin(), members.end());
        w.note(b[0] == fval(top, 0), "reduce" + at);
      }
    }
    std::vector<float> in(n), all(n * G), part(n);
    for (size_t i = 0; i < n; ++i) in[i] = fval(me, i);
    g.all_gather(in.data(), all.data(), n, DType::F32);
    for (int q = 0; q < G; ++q) w.note(all[q * n + n - 1] == fval(members[q], n - 1), "all_gather");
    for (int q = 0; q < G; ++q)
      for (size_t i = 0; i < n; ++i) all[q * n + i] = fval(me, q * n + i);
    g.reduce_scatter(all.data(), part.data(), n, DType::F32);
    float e = 0;
    for (int p : members) e += fval(p, gr * n);
    w.note(part[0] == e, "reduce_scatter" + at);
    g.gather(in.data(), gr == 0 ? all.data() : nullptr, n, DType::F32, 0);
    if (gr == 0) w.note(all[(G - 1) * n] == fval(members[G - 1], 0), "gather" + at);
    g.scatter(all.data(), part.data(), n, DType::F32, 0);
    w.note(part[n - 1] == fval(members[gr], n - 1), "scatter" + at);
  }
  g.barrier();
  if (G > 1) {
    int64_t v = me, got = -1;
    auto s = g.isend(&v, 1, DType::I64, (gr + 1) % G, 3);
    g.recv(&got, 1, DType::I64, (gr + G - 1) % G, 3);
    s.wait();
    w.note(got == members[(gr + G - 1) % G], "send/recv");
  }
}

// Colorings of W ranks: color and key of rank r.
struct Coloring {
  const char* name;
  int (*color)(int r, int W);
  int (*key)(int r, int W);
};
const Coloring kColorings[] = {
    {"odd_even", [](int r, int) { return r % 2; }, [](int r, int) { return r; }},
    {"halves_reversed", [](int r, int W) { return r < W / 2 ? 0 : 1; },
     [](int r, int) { return -r; }},
    {"all_one_key_ties", [](int, int) { return 5; }, [](int r, int) { return r / 2; }},
    {"rank0_out_mod3", [](int r, int) { return r == 0 ? Communicator::kNoColor : r % 3; },
     [](int r, int) { return r; }},
};

class Groups : public ::testing::TestWithParam<int> {};

TEST_P(Groups, EveryCollectiveInEveryColoring) {
  const int W = GetParam();
  CommOptions o;
  o.timeout = Millis(20000);
  auto comms = make_mem_communicators(W, o);
  expect_no_errors(run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    Wrong w;
    for (const Coloring& k : kColorings) {
      const int color = k.color(r, W);
      std::vector<std::pair<int, int>> order;  // (key, rank) of my color
      for (int q = 0; q < W; ++q)
        if (color >= 0 && k.color(q, W) == color) order.emplace_back(k.key(q, W), q);
      std::sort(order.begin(), order.end());
      std::vector<int> members;
      for (auto& [key, q] : order) members.push_back(q);
      auto g = c.split(color, k.key(r, W));
      w.note((g == nullptr) == (color < 0), std::string(k.name) + ": group made or not");
      if (g) {
        w.note(g->size() == static_cast<int>(members.size()) && members[g->rank()] == r &&
                   g->group() != 0,
               std::string(k.name) + ": group size/rank");
        check_group(*g, members, w);
      }
      // The parent still works after (and between) its groups' calls.
      int64_t one = 1;
      c.all_reduce(&one, 1, DType::I64, ReduceOp::Sum);
      w.note(one == W, std::string(k.name) + ": parent all_reduce");
    }
    if (!w.first.empty()) throw Error("wrong: " + w.first);
  }));
}

INSTANTIATE_TEST_SUITE_P(World, Groups, ::testing::Range(1, 10));

TEST(GroupsErrors, GroupFrameWhereParentsExpectedNamesBoth) {
  CommOptions o;
  o.timeout = Millis(5000);
  auto comms = make_mem_communicators(2, o);
  auto errs = run_threads(2, [&](int r) {
    auto g = comms[r]->split(0, 1 - r);  // group rank = 1 - parent rank
    float x = 1;
    if (r == 0) g->all_reduce(&x, 1, DType::F32);
    if (r == 1) comms[r]->all_reduce(&x, 1, DType::F32);
  });
  const std::string all = errs[0] + "\n" + errs[1];
  EXPECT_NE(all.find("group mismatch"), std::string::npos) << all;
  EXPECT_NE(errs[0].find("group ranks 0,1 = ranks 1,0; this is group rank 1 = rank 0"),
            std::string::npos)
      << errs[0];
}

// Flat and two-level results side by side, hosts simulated with set_hosts.
void check_two_level(const std::vector<int>& hosts, TwoLevel mode, bool expect_two) {
  const int W = static_cast<int>(hosts.size());
  CommOptions o;
  o.timeout = Millis(20000);
  o.segment_bytes = 4096;
  auto comms = make_mem_communicators(W, o);
  expect_no_errors(run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    c.set_hosts(hosts);
    c.set_two_level(mode);
    if (c.uses_two_level() != expect_two) throw Error("uses_two_level wrong");
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      // 5 MiB + 12 B: the leaders' pipeline of pieces (Sum only: slow under ThreadSanitizer).
      for (size_t n : {size_t(1), size_t(W - 1), size_t(1013), size_t(5 << 18) + 3}) {
        if (n > 1013 && op != ReduceOp::Sum) continue;
        std::vector<float> a(n), b(n);
        for (size_t i = 0; i < n; ++i) a[i] = b[i] = fval(r, i);
        c.all_reduce(a.data(), n, DType::F32, op);
        c.set_two_level(TwoLevel::Off);
        c.all_reduce(b.data(), n, DType::F32, op);
        c.set_two_level(mode);
        if (a != b) throw Error("two-level differs from the ring, n=" + std::to_string(n));
      }
    }
    Tensor t = Tensor::full({1013}, static_cast<float>(r));
    c.all_reduce(t, ReduceOp::Avg);
    if (t.data<float>()[1012] != (W - 1) / 2.0f) throw Error("tensor all_reduce wrong");
  }));
}

TEST(TwoLevel, TwoHostsOfTwo) {
  check_two_level({0, 0, 1, 1}, TwoLevel::Auto, true);
}
TEST(TwoLevel, UnevenHostsInterleaved) {
  check_two_level({3, 7, 3, 7, 7}, TwoLevel::Auto, true);
}
TEST(TwoLevel, ThreeHostsOfThree) {
  check_two_level({0, 0, 0, 1, 1, 1, 2, 2, 2}, TwoLevel::Auto, true);
}
TEST(TwoLevel, AutoSkipsALoneRankOnOn) {
  check_two_level({0, 1, 1}, TwoLevel::Auto, false);
  check_two_level({0, 1, 1}, TwoLevel::On, true);
  check_two_level({0, 0, 1, 1}, TwoLevel::Off, false);
}

// A named algorithm (--algo ring) keeps the flat one under auto; on still forces two levels.
TEST(TwoLevel, NamedAlgorithmKeepsItFlat) {
  auto comms = make_mem_communicators(4, CommOptions{});
  for (auto& c : comms) c->set_hosts({0, 0, 1, 1});
  EXPECT_TRUE(comms[0]->uses_two_level());
  comms[0]->set_algo(Algo::Ring);
  EXPECT_FALSE(comms[0]->uses_two_level());
  comms[0]->set_two_level(TwoLevel::On);
  EXPECT_TRUE(comms[0]->uses_two_level());
}

// Processes that meet through the TCP store; ENGINE_COMM_HOST_ID makes two "hosts" of two ranks
// (shared memory inside each, TCP between): split groups and the two-level all_reduce.
TEST(GroupsProcesses, SplitAndTwoLevelAcrossProcesses) {
  const int W = 4, port = testing::free_port();
  auto codes = testing::run_processes(W, [&](int r) {
    setenv("ENGINE_COMM_HOST_ID", r < 2 ? "hostA" : "hostB", 1);
    InitOptions o;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = r;
    o.world_size = W;
    o.connect.timeout = Millis(20000);
    auto c = init_communicator(o);
    if (c->transport_kind() != "shm+tcp" || c->num_hosts() != 2 || !c->uses_two_level())
      throw Error("hosts not seen: " + c->transport_kind());
    Wrong w;
    auto g = c->split(r % 2, -r);
    check_group(*g, r % 2 ? std::vector<int>{3, 1} : std::vector<int>{2, 0}, w);
    const size_t n = 1 << 18;
    std::vector<float> a(n);
    for (size_t i = 0; i < n; ++i) a[i] = fval(r, i);
    c->all_reduce(a.data(), n, DType::F32, ReduceOp::Sum);
    for (size_t i = 0; i < n; i += 997)
      w.note(a[i] == fval(0, i) + fval(1, i) + fval(2, i) + fval(3, i), "two-level all_reduce");
    if (!w.first.empty()) throw Error("wrong: " + w.first);
  });
  for (int r = 0; r < W; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Two hosts in network namespaces (tests/comm/netns_hosts.h), two ranks each: the two-level
// all_reduce gives the flat ring's sums, bit for bit.
TEST(GroupsProcesses, TwoLevelOverNetworkNamespacesEqualsTheRing) {
  testing::NetnsHosts net(2);
  if (!net.ok()) GTEST_SKIP() << "no network namespaces: " << net.why_not();
  const int W = 4, port = testing::free_port();
  auto codes = testing::run_processes(W, [&](int r) {
    ENGINE_CHECK(net.enter(r / 2), "cannot enter network namespace ", net.host(r / 2));
    setenv("ENGINE_COMM_HOST_ID", net.host(r / 2).c_str(), 1);
    InitOptions o;
    o.init_method = "tcp://" + net.addr(0) + ":" + std::to_string(port);
    o.rank = r;
    o.world_size = W;
    o.connect.timeout = Millis(20000);
    auto c = init_communicator(o);
    if (c->transport_kind() != "shm+tcp" || !c->uses_two_level())
      throw Error("two hosts not seen: " + c->transport_kind());
    for (size_t n : {size_t(1), size_t(1013), size_t(3 << 20)}) {
      std::vector<float> a(n), b(n);
      for (size_t i = 0; i < n; ++i) a[i] = b[i] = fval(r, i);
      c->all_reduce(a.data(), n, DType::F32, ReduceOp::Sum);
      c->set_two_level(TwoLevel::Off);
      c->all_reduce(b.data(), n, DType::F32, ReduceOp::Sum);
      c->set_two_level(TwoLevel::Auto);
      if (a != b) throw Error("two-level differs from the ring at n=" + std::to_string(n));
      for (size_t i = 0; i < n; i += 101)
        if (a[i] != fval(0, i) + fval(1, i) + fval(2, i) + fval(3, i))
          throw Error("wrong sum at " + std::to_string(i));
    }
  });
  for (int r = 0; r < W; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace engine::comm
