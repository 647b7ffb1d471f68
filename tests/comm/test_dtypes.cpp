// tests/comm/test_dtypes.cpp: every collective on every dtype (float32, bfloat16, float16, int32,
// int64, uint8) and every reduce op the dtype has, ranks as threads over the in-memory transport
// (W = 1..6), and the 16-bit floats over TCP, whose receive reduces through a scratch buffer.
#include <gtest/gtest.h>

#include <cstring>

#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/tensor.h"
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

// Notes a rank's first wrong result; the rank goes on taking part in every collective, so that a
// wrong result never turns into its peers' timeout.
struct Wrong {
  std::string first;
  void note(const std::string& where, const std::string& what) {
    if (first.empty() && !what.empty()) first = where + ": " + what;
  }
};

void all_reduce_every_op(Communicator& c, DType dt, Wrong& w) {
  const int W = c.size(), r = c.rank();
  for (size_t seg : {size_t(8), size_t(10), size_t(128) << 10}) {
    c.set_segment_bytes(seg);
    for (size_t n : {size_t(0), size_t(1), size_t(W + 1), size_t(W > 1 ? W - 1 : 3), size_t(1013)})
      for (ReduceOp op : ops_for(dt)) {
        auto b = tbuf(dt, n, r, op);
        c.all_reduce(b.data(), n, dt, op);
        w.note("all_reduce " + std::string(reduce_op_name(op)) + " n=" + std::to_string(n) +
                   " seg=" + std::to_string(seg),
               tcheck(dt, b.data(), n, [&](size_t i) { return texpect(dt, W, i, op); }));
      }
  }
}

void rooted_and_parts(Communicator& c, DType dt, Wrong& w) {
  const int W = c.size(), r = c.rank(), root = W - 1;
  const size_t n = 37, es = dtype_size(dt);
  const ReduceOp sum = ReduceOp::Sum;
  auto b = tbuf(dt, n, r, sum);
  c.reduce(b.data(), n, dt, ReduceOp::Max, root);
  w.note("reduce", tcheck(dt, b.data(), n, [&](size_t i) {
           return r == root ? texpect(dt, W, i, ReduceOp::Max) : tval(r, i, sum);
         }));
  b = tbuf(dt, n, r, sum);
  c.broadcast(b.data(), n, dt, root);
  w.note("broadcast", tcheck(dt, b.data(), n, [&](size_t i) { return tval(root, i, sum); }));
  std::vector<std::byte> all(W * n * es + 1);
  b = tbuf(dt, n, r, sum);
  c.all_gather(b.data(), all.data(), n, dt);
  w.note("all_gather",
         tcheck(dt, all.data(), W * n, [&](size_t i) { return tval(int(i / n), i % n, sum); }));
  c.gather(b.data(), r == root ? all.data() : nullptr, n, dt, root);
  if (r == root)
    w.note("gather",
           tcheck(dt, all.data(), W * n, [&](size_t i) { return tval(int(i / n), i % n, sum); }));
  auto in = tbuf(dt, W * n, r, sum);
  c.reduce_scatter(in.data(), b.data(), n, dt, sum);
  w.note("reduce_scatter",
         tcheck(dt, b.data(), n, [&](size_t i) { return texpect(dt, W, r * n + i, sum); }));
  in = tbuf(dt, W * n, root, sum);
  c.scatter(r == root ? in.data() : nullptr, b.data(), n, dt, root);
  w.note("scatter", tcheck(dt, b.data(), n, [&](size_t i) { return tval(root, r * n + i, sum); }));
}

class DtypeCollectives : public ::testing::TestWithParam<int> {};

TEST_P(DtypeCollectives, EveryCollectiveEveryDtypeAndOp) {
  const int W = GetParam();
  auto comms = make_mem_communicators(W);
  std::vector<Wrong> wrong(W);
  expect_no_errors(run_threads(W, [&](int r) {
    for (DType dt : all_dtypes()) {
      all_reduce_every_op(*comms[r], dt, wrong[r]);
      comms[r]->set_segment_bytes(16);
      rooted_and_parts(*comms[r], dt, wrong[r]);
    }
  }));
  for (int r = 0; r < W; ++r) EXPECT_EQ(wrong[r].first, "") << "W=" << W << " rank " << r;
}

INSTANTIATE_TEST_SUITE_P(W, DtypeCollectives, ::testing::Range(1, 7));

TEST(DtypeCollectives, TensorOverloadsTakeSixteenBitFloats) {
  const int W = 3;
  const size_t n = 101;
  auto comms = make_mem_communicators(W);
  std::vector<Wrong> wrong(W);
  expect_no_errors(run_threads(W, [&](int r) {
    for (DType dt : {DType::BF16, DType::F16}) {
      Tensor t = Tensor::empty({static_cast<int64_t>(n)}, dt);
      auto b = tbuf(dt, n, r, ReduceOp::Avg);
      std::memcpy(t.raw_data(), b.data(), n * 2);
      comms[r]->all_reduce(t, ReduceOp::Avg);
      wrong[r].note(dtype_name(dt), tcheck(dt, t.raw_data(), n, [&](size_t i) {
                      return texpect(dt, W, i, ReduceOp::Avg);
                    }));
    }
  }));
  for (int r = 0; r < W; ++r) EXPECT_EQ(wrong[r].first, "") << "rank " << r;
}

// Over TCP a receive reduces through a scratch buffer that a read may end mid-element.
TEST(DtypeCollectives, SixteenBitFloatsOverTcp) {
  const int W = 3;
  const size_t n = 100003;
  auto store = std::make_shared<MemStore>(Millis(10000));
  ConnectOptions o;
  o.timeout = Millis(10000);
  o.transport = TransportKind::Tcp;
  std::vector<Wrong> wrong(W);
  expect_no_errors(run_threads(W, [&](int r) {
    auto c = connect_communicator(store, r, W, o);
    for (DType dt : {DType::BF16, DType::F16})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Prod}) {
        auto b = tbuf(dt, n, r, op);
        c->all_reduce(b.data(), n, dt, op);
        wrong[r].note(dtype_name(dt),
                      tcheck(dt, b.data(), n, [&](size_t i) { return texpect(dt, W, i, op); }));
      }
  }));
  for (int r = 0; r < W; ++r) EXPECT_EQ(wrong[r].first, "") << "rank " << r;
}

TEST(DtypeCollectives, AvgOnIntegersIsRefused) {
  auto comms = make_mem_communicators(1);
  int32_t x = 3;
  EXPECT_THROW(comms[0]->all_reduce(&x, 1, DType::I32, ReduceOp::Avg), Error);
}

}  // namespace
}  // namespace engine::comm
