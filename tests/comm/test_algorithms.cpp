// tests/comm/test_algorithms.cpp: every algorithm of comm/algorithms/ (ring, recursive doubling,
// Rabenseifner's halving-doubling, binomial trees, and auto's choice) against the exact result, for
// W = 1..9 ranks as threads over the in-memory transport, every dtype and reduce op, counts 0, 1,
// below W, odd and prime, several segment sizes; every rank ends with the same bits; ranks that
// chose different algorithms fail instead of hanging.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/dtype_values.h"

namespace engine::comm {
namespace {

using testing::all_dtypes;
using testing::expect_no_errors;
using testing::ops_for;
using testing::run_threads;
using testing::tbuf;
using testing::tcheck;
using testing::texpect;
using testing::tval;

const Algo kAlgos[] = {Algo::Ring, Algo::Rd, Algo::Rh, Algo::Tree, Algo::Auto};

std::vector<size_t> counts(int W) {
  return {0, 1, static_cast<size_t>(W > 2 ? W - 2 : 2), static_cast<size_t>(W + 1), 13, 1013};
}

// A rank's first wrong result; the rank goes on taking part in every collective.
struct Wrong {
  std::string first;
  void note(const std::string& where, const std::string& what) {
    if (first.empty() && !what.empty()) first = where + ": " + what;
  }
};

void all_reduce_cases(Communicator& c, Algo a, Wrong& w) {
  const int W = c.size(), r = c.rank();
  for (DType dt : all_dtypes())
    for (size_t n : counts(W))
      for (ReduceOp op : ops_for(dt)) {
        auto b = tbuf(dt, n, r, op);
        c.all_reduce(b.data(), n, dt, op);
        w.note(std::string(algo_name(a)) + " all_reduce " + reduce_op_name(op) +
                   " n=" + std::to_string(n),
               tcheck(dt, b.data(), n, [&](size_t i) { return texpect(dt, W, i, op); }));
      }
}

void rooted_cases(Communicator& c, Algo a, Wrong& w) {
  const int W = c.size(), r = c.rank();
  for (DType dt : all_dtypes())
    for (size_t n : counts(W))
      for (int root : {0, W / 2, W - 1}) {
        const std::string at =
            std::string(algo_name(a)) + " root " + std::to_string(root) + " n=" + std::to_string(n);
        auto b = tbuf(dt, n, r, ReduceOp::Sum);
        c.broadcast(b.data(), n, dt, root);
        w.note(at + " broadcast",
               tcheck(dt, b.data(), n, [&](size_t i) { return tval(root, i, ReduceOp::Sum); }));
        for (ReduceOp op : ops_for(dt)) {
          b = tbuf(dt, n, r, op);
          c.reduce(b.data(), n, dt, op, root);
          w.note(at + " reduce " + reduce_op_name(op), tcheck(dt, b.data(), n, [&](size_t i) {
                   return r == root ? texpect(dt, W, i, op) : tval(r, i, op);
                 }));
        }
      }
}

class Algorithms : public ::testing::TestWithParam<int> {};

TEST_P(Algorithms, EveryAlgorithmDtypeOpAndCount) {
  const int W = GetParam();
  auto comms = make_mem_communicators(W);
  std::vector<Wrong> wrong(W);
  expect_no_errors(run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    for (Algo a : kAlgos) {
      c.set_algo(a);
      for (size_t seg : {size_t(8), size_t(128) << 10}) {
        c.set_segment_bytes(seg);
        all_reduce_cases(c, a, wrong[r]);
        rooted_cases(c, a, wrong[r]);
      }
    }
  }));
  for (int r = 0; r < W; ++r) EXPECT_EQ(wrong[r].first, "") << "W=" << W << " rank " << r;
}

INSTANTIATE_TEST_SUITE_P(W, Algorithms, ::testing::Range(1, 10));

// Inexact float sums, and max/min over +0 and -0 (equal, different bits): every rank must end
// with the same bits, though recursive doubling computes each rank's result on that rank.
TEST(Algorithms, EveryRankEndsWithTheSameBits) {
  for (int W : {3, 4, 6}) {
    auto comms = make_mem_communicators(W);
    const size_t n = 777;
    std::vector<std::vector<float>> out(W);
    for (Algo a : kAlgos)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg}) {
        expect_no_errors(run_threads(W, [&](int r) {
          comms[r]->set_algo(a);
          std::mt19937 rng(r * 131 + 7);
          std::uniform_real_distribution<float> u(-1.0f, 1.0f);
          out[r].resize(n);
          for (size_t i = 0; i < n; ++i)
            out[r][i] =
                op == ReduceOp::Sum || op == ReduceOp::Avg ? u(rng) : ((i + r) % 2 ? 0.0f : -0.0f);
          comms[r]->all_reduce(out[r].data(), n, DType::F32, op);
        }));
        for (int r = 1; r < W; ++r)
          EXPECT_EQ(std::memcmp(out[r].data(), out[0].data(), n * sizeof(float)), 0)
              << algo_name(a) << " " << reduce_op_name(op) << " W=" << W << " rank " << r;
      }
  }
}

TEST(Algorithms, RanksThatChoseDifferentAlgorithmsFail) {
  const int W = 4;
  CommOptions o;
  o.timeout = Millis(5000);
  auto comms = make_mem_communicators(W, o);
  auto errs = run_threads(W, [&](int r) {
    comms[r]->set_algo(r == 2 ? Algo::Rd : Algo::Ring);
    std::vector<float> b(64, 1.0f);
    comms[r]->all_reduce(b.data(), b.size(), DType::F32, ReduceOp::Sum);
  });
  int failed = 0;
  for (const auto& e : errs) failed += !e.empty();
  EXPECT_GT(failed, 0);
  for (const auto& e : errs) {
    if (!e.empty()) {
      EXPECT_EQ(e.find("waited"), std::string::npos) << "a timeout: " << e;
    }
  }
}

TEST(Algorithms, NamesAndAutoChoice) {
  for (Algo a : kAlgos) EXPECT_EQ(algo_from_name(algo_name(a)), a);
  EXPECT_THROW(algo_from_name("bcube"), Error);
  EXPECT_EQ(auto_all_reduce(8, 4), Algo::Rd);
  EXPECT_EQ(auto_all_reduce(size_t(32) << 20, 4), Algo::Ring);
  EXPECT_EQ(auto_rooted(8, 8), Algo::Tree);
}

}  // namespace
}  // namespace engine::comm
