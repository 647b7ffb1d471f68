// tests/comm/test_chunk_tree.cpp: the fixed-tree all_reduce (comm/algorithms/chunk_tree.h) with
// ranks as threads: for n = 8 and n = 6 chunks and every world size W = 1..n, each rank folds its
// share of the chunks (core/chunk_tree.h's Accumulator), and every rank's result must have the
// bits of one process folding all n chunks - on data where another association gives other bits.
// In memory for every W, over shared memory and TCP for a few; errors name the rank and leaf.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/chunk_tree.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/dtype_values.h"

namespace engine::comm {
namespace {

namespace ct = chunk_tree;
using testing::expect_no_errors;
using testing::run_threads;

using Buf = std::vector<std::byte>;

// Leaf j's partial, element i. Floats: 11 significant bits, magnitudes spanning more bits than
// the dtype holds (2^-16..2^16 for float32, 2^-40..2^40 for float64) and both signs, so that
// sums round and their bits depend on the association. int64: exact.
Buf leaf(DType dt, size_t j, size_t count) {
  Buf b(count * dtype_size(dt) + 1);
  for (size_t i = 0; i < count; ++i) {
    double v = double(int64_t(j * 1000003 + i * 7919) % 1000) + 1.0;
    if (dt != DType::I64) {
      const int span = dt == DType::F64 ? 40 : 16;
      v = std::ldexp(1.0 + v / 1024.0, int((j * 29 + i * 3) % (2 * span + 1)) - span);
      if ((i + j) % 3 == 0) v = -v;
    }
    testing::put(dt, b.data(), i, v);
  }
  return b;
}

struct AddBuf {
  DType dt;
  size_t count;
  void operator()(Buf& a, const Buf& b) const {
    reduce_into(a.data(), b.data(), count, dt, ReduceOp::Sum);
  }
};

// This rank's nodes after folding its chunks [first, last) in leaf order.
std::vector<std::pair<ct::Node, Buf>> held(DType dt, size_t n, size_t count, ct::Range r) {
  ct::Accumulator<Buf, AddBuf> acc(n, AddBuf{dt, count});
  for (size_t j = r.begin; j < r.end; ++j) acc.push(j, leaf(dt, j, count));
  return acc.take();
}

// One process over all n chunks: the bits every world size must give.
Buf reference(DType dt, size_t n, size_t count) {
  return held(dt, n, count, {0, n}).front().second;
}

bool same_bits(const Buf& a, const Buf& b, size_t nbytes) {
  return nbytes == 0 || std::memcmp(a.data(), b.data(), nbytes) == 0;
}

const DType kDtypes[] = {DType::F32, DType::F64, DType::I64};

// Rank r of c's world: the collective for n chunks of every dtype and count; "" or what differed.
std::string check_rank(Communicator& c, size_t n, const std::vector<size_t>& counts) {
  const int W = c.size(), r = c.rank();
  for (DType dt : kDtypes)
    for (size_t count : counts) {
      auto mine = held(dt, n, count, ct::rank_chunks(n, W, r));
      std::vector<TreePartial> parts;
      for (auto& [node, buf] : mine) parts.push_back({node, buf.data()});
      Buf out(count * dtype_size(dt) + 1);
      c.chunk_tree_all_reduce(n, parts, out.data(), count, dt);
      if (!same_bits(out, reference(dt, n, count), count * dtype_size(dt)))
        return std::string(dtype_name(dt)) + " count=" + std::to_string(count) + " differs";
    }
  return "";
}

std::vector<size_t> counts_for(int W) {
  return {0, 1, size_t(W > 1 ? W - 1 : 2), size_t(W + 1), 1013};
}

// The data must tell the association apart, or the tests could not fail.
TEST(ChunkTreeCollective, TheDataDependsOnTheAssociation) {
  for (size_t n : {size_t(6), size_t(8)})
    for (DType dt : {DType::F32, DType::F64}) {
      const size_t count = 1013, nb = count * dtype_size(dt);
      Buf naive = leaf(dt, 0, count);
      for (size_t j = 1; j < n; ++j) AddBuf{dt, count}(naive, leaf(dt, j, count));
      EXPECT_FALSE(same_bits(naive, reference(dt, n, count), nb))
          << "n=" << n << " " << dtype_name(dt);
    }
}

TEST(ChunkTreeCollective, EveryWorldSizeGivesTheSameBitsInMemory) {
  for (size_t n : {size_t(8), size_t(6)})
    for (int W = 1; W <= static_cast<int>(n); ++W) {
      CommOptions o;
      o.segment_bytes = 64;  // many segments per slice (shared memory and TCP: the default)
      auto comms = make_mem_communicators(W, o);
      std::vector<std::string> wrong(W);
      expect_no_errors(
          run_threads(W, [&](int r) { wrong[r] = check_rank(*comms[r], n, counts_for(W)); }));
      for (int r = 0; r < W; ++r)
        EXPECT_EQ(wrong[r], "") << "n=" << n << " W=" << W << " rank " << r;
    }
}

// Over the real transports: ranks meet through one MemStore.
void over(TransportKind kind, size_t n, int W) {
  auto store = std::make_shared<MemStore>(Millis(10000));
  ConnectOptions o;
  o.timeout = Millis(10000);
  o.transport = kind;
  std::vector<std::string> wrong(W);
  expect_no_errors(run_threads(W, [&](int r) {
    auto c = connect_communicator(store, r, W, o);
    wrong[r] = check_rank(*c, n, {0, size_t(W - 1), 1013, 100000});
  }));
  for (int r = 0; r < W; ++r)
    EXPECT_EQ(wrong[r], "") << transport_kind_name(kind) << " n=" << n << " W=" << W << " rank "
                            << r;
}

TEST(ChunkTreeCollective, SharedMemory) {
  over(TransportKind::Shm, 8, 3);
  over(TransportKind::Shm, 6, 4);
}

TEST(ChunkTreeCollective, Tcp) {
  over(TransportKind::Tcp, 8, 3);
}

// The result written over the rank's first partial: one chunk per rank, and several, in many
// segments.
TEST(ChunkTreeCollective, InPlace) {
  const size_t count = 1013;
  for (const auto& nw : {std::pair<size_t, int>{5, 5}, {8, 3}}) {
    const size_t n = nw.first;  // plain variables: clang 14 cannot capture a structured binding
    const int W = nw.second;
    CommOptions o;
    o.segment_bytes = 64;
    auto comms = make_mem_communicators(W, o);
    std::vector<std::string> wrong(W);
    expect_no_errors(run_threads(W, [&](int r) {
      auto mine = held(DType::F32, n, count, ct::rank_chunks(n, W, r));
      std::vector<TreePartial> parts;
      for (auto& [node, buf] : mine) parts.push_back({node, buf.data()});
      Buf& b = mine.front().second;
      comms[r]->chunk_tree_all_reduce(n, parts, b.data(), count, DType::F32);
      if (!same_bits(b, reference(DType::F32, n, count), count * 4)) wrong[r] = "differs";
    }));
    for (int r = 0; r < W; ++r) EXPECT_EQ(wrong[r], "") << "n=" << n << " W=" << W << " rank " << r;
  }
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Nodes that overlap or leave a leaf out: every rank fails, naming the leaf and the ranks.
TEST(ChunkTreeCollective, NodesMustCoverEveryLeafOnce) {
  auto run = [](std::vector<std::vector<ct::Node>> by) {
    const int W = static_cast<int>(by.size());
    auto comms = make_mem_communicators(W);
    float x[2] = {1, 2}, out[2];
    return run_threads(W, [&](int r) {
      std::vector<TreePartial> parts;
      for (ct::Node node : by[r]) parts.push_back({node, x});
      comms[r]->chunk_tree_all_reduce(4, parts, out, 2, DType::F32);
    });
  };
  auto errs = run({{{1, 0}}, {{0, 1}, {0, 2}}, {{0, 3}}});
  for (const auto& e : errs) EXPECT_TRUE(has(e, "leaf 1 is held by rank 0 and by rank 1")) << e;
  errs = run({{{1, 0}}, {{0, 3}}});
  for (const auto& e : errs) EXPECT_TRUE(has(e, "no rank holds leaf 2 of 4")) << e;
  errs = run({{{2, 1}}, {{2, 0}}});
  EXPECT_TRUE(has(errs[0], "(2, 1) is not a node of a tree of 4 leaves")) << errs[0];
  EXPECT_NE(errs[1], "");
}

// Ranks that disagree on the tree fail as ranks that disagree on a size; a rank that never comes
// is named in the timeout.
TEST(ChunkTreeCollective, MismatchAndTimeout) {
  auto comms = make_mem_communicators(2);
  float x = 1, out;
  auto errs = run_threads(2, [&](int r) {
    comms[r]->chunk_tree_all_reduce(r == 0 ? 2 : 3, {{ct::Node{0, size_t(r)}, &x}}, &out, 1,
                                    DType::F32);
  });
  for (const auto& e : errs) EXPECT_TRUE(has(e, "leaves=2") && has(e, "leaves=3")) << e;
  CommOptions o;
  o.timeout = Millis(200);
  comms = make_mem_communicators(2, o);
  std::string err;
  try {
    comms[0]->chunk_tree_all_reduce(2, {{ct::Node{0, 0}, &x}}, &out, 1, DType::F32);
  } catch (const TimeoutError& e) {
    err = e.what();
  }
  EXPECT_TRUE(has(err, "timed out") && has(err, "rank 1")) << err;
}

}  // namespace
}  // namespace engine::comm
