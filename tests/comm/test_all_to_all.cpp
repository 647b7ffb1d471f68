// tests/comm/test_all_to_all.cpp: all_to_all and all_to_all_single for W = 1..9 (ranks as
// threads): equal chunks of odd counts, split sizes with zeros, CPU tensors, split sizes two ranks
// disagree on; and across processes over shared memory and TCP.
#include <gtest/gtest.h>

#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

using testing::expect_no_errors;
using testing::ival;
using testing::run_threads;

// Element k of the chunk rank `from` sends to rank `to`.
int64_t val(int from, int to, size_t k) {
  return ival(from, to * 100003 + k);
}

// What rank r sends to rank j with split sizes (zeros included).
size_t split(int r, int j) {
  return static_cast<size_t>((r * 3 + j * 5) % 4) * 7 / 2;
}

// Equal chunks of count elements, then split sizes; returns the first wrong thing or "".
std::string check_all_to_all(Communicator& c) {
  const int W = c.size(), r = c.rank();
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1013), size_t(40000)}) {
    std::vector<int64_t> in(W * n), out(W * n, -1);
    for (int j = 0; j < W; ++j)
      for (size_t k = 0; k < n; ++k) in[j * n + k] = val(r, j, k);
    c.all_to_all(in.data(), out.data(), n, DType::I64);
    for (int j = 0; j < W; ++j)
      for (size_t k = 0; k < n; ++k)
        if (out[j * n + k] != val(j, r, k)) return "all_to_all n=" + std::to_string(n);
  }
  std::vector<size_t> sc(W), rc(W);
  for (int j = 0; j < W; ++j) sc[j] = split(r, j), rc[j] = split(j, r);
  std::vector<int64_t> in, out;
  for (int j = 0; j < W; ++j)
    for (size_t k = 0; k < sc[j]; ++k) in.push_back(val(r, j, k));
  size_t total = 0;
  for (size_t x : rc) total += x;
  out.assign(total, -1);
  c.all_to_all_single(in.data(), out.data(), sc, rc, DType::I64);
  size_t at = 0;
  for (int j = 0; j < W; ++j)
    for (size_t k = 0; k < rc[j]; ++k)
      if (out[at++] != val(j, r, k)) return "all_to_all_single from rank " + std::to_string(j);
  // CPU tensors: float, equal splits and split sizes.
  const size_t n = 5;
  std::vector<float> v(W * n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r * 1000 + i);
  Tensor ti = Tensor::from_vector(v, {static_cast<int64_t>(W * n)});
  Tensor to = Tensor::zeros({static_cast<int64_t>(W * n)});
  c.all_to_all_single(ti, to, {}, {});
  for (int j = 0; j < W; ++j)
    if (to.data<float>()[j * n + 1] != static_cast<float>(j * 1000 + r * n + 1))
      return "tensor all_to_all";
  return "";
}

class AllToAll : public ::testing::TestWithParam<int> {};

TEST_P(AllToAll, EqualAndSplitSizes) {
  const int W = GetParam();
  CommOptions o;
  o.timeout = Millis(20000);
  auto comms = make_mem_communicators(W, o);
  expect_no_errors(run_threads(W, [&](int r) {
    if (std::string w = check_all_to_all(*comms[r]); !w.empty()) throw Error("wrong: " + w);
  }));
}

INSTANTIATE_TEST_SUITE_P(World, AllToAll, ::testing::Range(1, 10));

TEST(AllToAllErrors, SplitSizesThePairDisagreesOn) {
  CommOptions o;
  o.timeout = Millis(5000);
  auto comms = make_mem_communicators(2, o);
  auto errs = run_threads(2, [&](int r) {
    std::vector<float> in(8), out(8);
    // Rank 0 sends 3 to rank 1, which expects 2.
    std::vector<size_t> sc = {1, 3}, rc = {1, 3};
    if (r == 1) sc = {3, 1}, rc = {2, 1};
    comms[r]->all_to_all_single(in.data(), out.data(), sc, rc, DType::F32);
  });
  const std::string all = errs[0] + "\n" + errs[1];
  EXPECT_NE(all.find("all_to_all(count=3"), std::string::npos) << all;
  EXPECT_NE(all.find("all_to_all(count=2"), std::string::npos) << all;
  EXPECT_THROW(comms[0]->all_to_all_single(nullptr, nullptr, {1}, {1}, DType::F32), Error);
}

TEST(AllToAllProcesses, OverShmAndTcp) {
  for (TransportKind kind : {TransportKind::Shm, TransportKind::Tcp}) {
    const int W = 3, port = testing::free_port();
    auto codes = testing::run_processes(W, [&](int r) {
      InitOptions o;
      o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
      o.rank = r;
      o.world_size = W;
      o.connect.timeout = Millis(20000);
      o.connect.transport = kind;
      auto c = init_communicator(o);
      if (std::string w = check_all_to_all(*c); !w.empty()) throw Error("wrong: " + w);
    });
    for (int r = 0; r < W; ++r)
      EXPECT_EQ(codes[r], 0) << transport_kind_name(kind) << " rank " << r;
  }
}

}  // namespace
}  // namespace engine::comm
