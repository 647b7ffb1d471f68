// tests/comm/test_process.cpp: ranks as forked processes meeting through tcp:// (rank 0 serves the
// store), over TCP and over shared memory; and the Tensor overloads.
#include <gtest/gtest.h>

#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/tensor.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

struct ProcCase {
  TransportKind transport;
  int world;
};

class Processes : public ::testing::TestWithParam<ProcCase> {};

TEST_P(Processes, CollectivesAcrossProcesses) {
  // Plain variables, not a structured binding: clang 14 (the sanitizer builds') cannot capture one.
  const TransportKind kind = GetParam().transport;
  const int W = GetParam().world;
  const int port = testing::free_port();
  auto codes = testing::run_processes(W, [&](int r) {
    InitOptions o;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = r;
    o.world_size = W;
    o.connect.timeout = Millis(20000);
    o.connect.transport = kind;
    o.connect.segment_bytes = 64 << 10;
    auto c = init_communicator(o);
    const std::string want = kind == TransportKind::Tcp ? "tcp" : "shm";
    if (c->transport_kind() != want) throw Error("transport " + c->transport_kind());
    if (c->local_size() != W || c->local_rank() != r) throw Error("bad local rank");
    for (size_t n : {size_t(0), size_t(1), size_t(W + 1), size_t(1013), size_t(1 << 18)}) {
      std::vector<float> b(n);
      for (size_t i = 0; i < n; ++i) b[i] = testing::fval(r, i);
      c->all_reduce(b.data(), n, DType::F32, ReduceOp::Avg);
      for (size_t i = 0; i < n; ++i) {
        float e = 0;
        for (int q = 0; q < W; ++q) e += testing::fval(q, i);
        if (b[i] != e / W) throw Error("all_reduce wrong at " + std::to_string(i));
      }
      std::vector<int64_t> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = testing::ival(r, i);
      c->broadcast(v.data(), n, DType::I64, 1 % W);
      for (size_t i = 0; i < n; ++i)
        if (v[i] != testing::ival(1 % W, i)) throw Error("broadcast wrong");
    }
    c->barrier();
  });
  for (int r = 0; r < W; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Transports, Processes,
                         ::testing::Values(ProcCase{TransportKind::Tcp, 2},
                                           ProcCase{TransportKind::Tcp, 4},
                                           ProcCase{TransportKind::Shm, 2},
                                           ProcCase{TransportKind::Shm, 4}),
                         [](const auto& p) {
                           return std::string(transport_kind_name(p.param.transport)) + "_W" +
                                  std::to_string(p.param.world);
                         });

// Two "hosts" of two ranks each on one machine (ENGINE_COMM_HOST_ID): shared memory inside a host,
// TCP between them.
TEST(Processes, MixedShmAndTcp) {
  const int W = 4, port = testing::free_port();
  auto codes = testing::run_processes(W, [&](int r) {
    setenv("ENGINE_COMM_HOST_ID", r < 2 ? "host-a" : "host-b", 1);
    InitOptions o;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = r;
    o.world_size = W;
    o.connect.timeout = Millis(20000);
    auto c = init_communicator(o);
    if (c->transport_kind() != "shm+tcp") throw Error("transport " + c->transport_kind());
    if (c->local_size() != 2 || c->local_rank() != r % 2) throw Error("bad local rank");
    for (size_t n : {size_t(1), size_t(1013), size_t(1 << 18)}) {
      std::vector<float> b(n);
      for (size_t i = 0; i < n; ++i) b[i] = testing::fval(r, i);
      c->all_reduce(b.data(), n, DType::F32);
      for (size_t i = 0; i < n; ++i) {
        float e = 0;
        for (int q = 0; q < W; ++q) e += testing::fval(q, i);
        if (b[i] != e) throw Error("all_reduce wrong at " + std::to_string(i));
      }
      std::vector<float> all(n * W);
      c->all_gather(b.data(), all.data(), n, DType::F32);
      if (all[(W - 1) * n] != b[0]) throw Error("all_gather wrong");
    }
    c->barrier();
  });
  for (int r = 0; r < W; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(Processes, TransportDisagreementIsAnError) {
  auto store = std::make_shared<MemStore>(Millis(5000));
  auto errs = testing::run_threads(2, [&](int r) {
    ConnectOptions o;
    o.timeout = Millis(5000);
    o.transport = r == 0 ? TransportKind::Tcp : TransportKind::Shm;
    connect_communicator(store, r, 2, o);
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errs[r].find("disagree on the transport"), std::string::npos) << errs[r];
}

TEST(TensorOverloads, CpuTensors) {
  const int W = 3;
  auto comms = make_mem_communicators(W);
  testing::expect_no_errors(testing::run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    Tensor t = Tensor::full({2, 3}, static_cast<float>(r + 1));
    c.all_reduce(t);
    EXPECT_EQ(t.to_vector(), std::vector<float>(6, 6.0f));
    Tensor ids = Tensor::from_vector_i64({r, 10 * r}, {2});
    Tensor all = Tensor::zeros({2 * W}, DType::I64);
    c.all_gather(ids, all);
    EXPECT_EQ(all.to_vector_i64(), (std::vector<int64_t>{0, 0, 1, 10, 2, 20}));
    Tensor b = Tensor::full({4}, static_cast<float>(r));
    c.broadcast(b, 2);
    EXPECT_EQ(b.to_vector(), std::vector<float>(4, 2.0f));
    Tensor a = Tensor::full({5}, 1.0f);
    Work w = c.all_reduce_async(a, ReduceOp::Avg);
    w.wait();
    EXPECT_EQ(a.to_vector(), std::vector<float>(5, 1.0f));
    Tensor wrong = Tensor::zeros({2 * W + 1}, DType::I64);
    EXPECT_THROW(c.all_gather(ids, wrong), Error);
    EXPECT_THROW(c.all_reduce(Tensor()), Error);
    EXPECT_THROW(c.all_reduce(ids, ReduceOp::Avg), Error);  // AVG needs a float dtype
  }));
}

}  // namespace
}  // namespace engine::comm
