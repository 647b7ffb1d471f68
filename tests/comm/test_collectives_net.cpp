// tests/comm/test_collectives_net.cpp: the collectives over the real transports - TCP on loopback
// and shared memory - with ranks as threads that meet through a MemStore, and through the TCP and
// file stores of the init methods.
#include <gtest/gtest.h>

#include <filesystem>

#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"
#include "tests/common/temp_dir.h"

namespace engine::comm {
namespace {

using testing::expect_no_errors;
using testing::fval;
using testing::ival;
using testing::run_threads;

struct NetCase {
  TransportKind transport;
  int world;
};

std::string case_name(const ::testing::TestParamInfo<NetCase>& p) {
  return std::string(transport_kind_name(p.param.transport)) + "_W" + std::to_string(p.param.world);
}

class NetCollectives : public ::testing::TestWithParam<NetCase> {};

// Runs the check on every rank; each rank connects through one shared MemStore.
void with_comms(TransportKind kind, int W, const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<MemStore>(Millis(10000));
  ConnectOptions o;
  o.timeout = Millis(10000);
  o.transport = kind;
  expect_no_errors(run_threads(W, [&](int r) {
    auto c = connect_communicator(store, r, W, o);
    EXPECT_EQ(c->rank(), r);
    EXPECT_EQ(c->size(), W);
    if (W > 1) {
      EXPECT_EQ(c->transport_kind(), kind == TransportKind::Tcp ? "tcp" : "shm");
    }
    fn(*c);
  }));
}

TEST_P(NetCollectives, AllCollectives) {
  // Plain variables, not a structured binding: clang 14 (the sanitizer builds') cannot capture one.
  const TransportKind kind = GetParam().transport;
  const int W = GetParam().world;
  const bool big = W == 2 || W == 4;
  with_comms(kind, W, [&](Communicator& c) {
    const int r = c.rank();
    // A wrong result is noted and the rank goes on taking part in every collective: were it to
    // return, its peers would wait in their next collective until the timeout and the failure
    // would show late, as a timeout. Each rank reports its first wrong result at the end.
    std::string wrong;
    auto note = [&](const std::string& what) {
      if (wrong.empty()) wrong = what;
    };
    std::vector<size_t> counts = {0, 1, size_t(W > 1 ? W - 1 : 2), size_t(W + 1), 1013};
    if (big) counts.push_back(1 << 20);
    for (size_t seg : {size_t(256), size_t(128 << 10)}) {
      c.set_segment_bytes(seg);
      for (size_t n : counts) {
        if (n == (1 << 20) && seg < 4096) continue;
        const std::string at = " n=" + std::to_string(n) + " seg=" + std::to_string(seg);
        std::vector<float> b(n);
        for (size_t i = 0; i < n; ++i) b[i] = fval(r, i);
        c.all_reduce(b.data(), n, DType::F32, ReduceOp::Sum);
        for (size_t i = 0; i < n; ++i) {
          float e = 0;
          for (int q = 0; q < W; ++q) e += fval(q, i);
          if (b[i] != e) {
            note("all_reduce" + at + " [" + std::to_string(i) + "]");
            break;
          }
        }
        std::vector<int64_t> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = ival(r, i);
        c.broadcast(v.data(), n, DType::I64, W - 1);
        for (size_t i = 0; i < n; ++i)
          if (v[i] != ival(W - 1, i)) {
            note("broadcast" + at + " [" + std::to_string(i) + "]");
            break;
          }
        if (n > 5000) continue;
        std::vector<float> all(n * W);
        c.all_gather(b.data(), all.data(), n, DType::F32);
        for (size_t j = 0; j < n * W; ++j)
          if (all[j] != b[j % (n ? n : 1)]) {
            note("all_gather" + at);
            break;
          }
        for (size_t i = 0; i < n; ++i) b[i] = fval(r, i);
        c.reduce(b.data(), n, DType::F32, ReduceOp::Max, 0);
        if (r == 0)
          for (size_t i = 0; i < n; ++i)
            if (b[i] != fval(W - 1, i)) {
              note("reduce MAX" + at);
              break;
            }
        std::vector<float> rs_in(n * W), rs_out(n);
        for (size_t i = 0; i < n * W; ++i) rs_in[i] = fval(r, i);
        c.reduce_scatter(rs_in.data(), rs_out.data(), n, DType::F32, ReduceOp::Min);
        for (size_t i = 0; i < n; ++i)
          if (rs_out[i] != fval(0, r * n + i)) {
            note("reduce_scatter" + at);
            break;
          }
        std::vector<float> g(n * W);
        c.gather(rs_out.data(), g.data(), n, DType::F32, W / 2);
        std::vector<float> s(n);
        c.scatter(g.data(), s.data(), n, DType::F32, W / 2);
        for (size_t i = 0; i < n; ++i)
          if (s[i] != rs_out[i]) {
            note("gather+scatter" + at);
            break;
          }
      }
    }
    if (W > 1) {
      int64_t x = r, y = -1;
      Work rw = c.irecv(&y, 1, DType::I64, (r - 1 + W) % W);
      c.send(&x, 1, DType::I64, (r + 1) % W);
      rw.wait();
      EXPECT_EQ(y, (r - 1 + W) % W);
    }
    c.barrier();
    EXPECT_EQ(wrong, "") << "rank " << r << ": first wrong result";
  });
}

INSTANTIATE_TEST_SUITE_P(
    Transports, NetCollectives,
    ::testing::Values(NetCase{TransportKind::Tcp, 1}, NetCase{TransportKind::Tcp, 2},
                      NetCase{TransportKind::Tcp, 3}, NetCase{TransportKind::Tcp, 4},
                      NetCase{TransportKind::Tcp, 8}, NetCase{TransportKind::Shm, 2},
                      NetCase{TransportKind::Shm, 3}, NetCase{TransportKind::Shm, 4},
                      NetCase{TransportKind::Shm, 5}, NetCase{TransportKind::Shm, 8}),
    case_name);

TEST(InitMethods, TcpInitMethodAsThreads) {
  const int W = 3;
  const int port = testing::free_port();
  expect_no_errors(run_threads(W, [&](int r) {
    InitOptions o;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = r;
    o.world_size = W;
    o.connect.timeout = Millis(10000);
    auto c = init_communicator(o);
    float v = static_cast<float>(r + 1);
    c->all_reduce(&v, 1, DType::F32);
    EXPECT_EQ(v, 6.0f);
    c->barrier();
  }));
}

TEST(InitMethods, FileInitMethodAsThreads) {
  const int W = 2;
  const engine::testing::TempDir dir;
  expect_no_errors(run_threads(W, [&](int r) {
    InitOptions o;
    o.init_method = "file://" + dir.path().string();
    o.rank = r;
    o.world_size = W;
    o.connect.timeout = Millis(10000);
    o.connect.transport = TransportKind::Tcp;
    auto c = init_communicator(o);
    int64_t v = r + 10;
    c->all_reduce(&v, 1, DType::I64, ReduceOp::Max);
    EXPECT_EQ(v, 11);
  }));
}

TEST(InitMethods, EnvInitMethodReadsTorchrunVariables) {
  const int port = testing::free_port();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("WORLD_SIZE", "2", 1);
  // RANK differs per rank, so give it explicitly (explicit wins over the environment).
  setenv("RANK", "0", 1);
  expect_no_errors(run_threads(2, [&](int r) {
    InitOptions o;
    o.rank = r == 0 ? -1 : 1;  // rank 0 from RANK, rank 1 explicit
    o.connect.timeout = Millis(10000);
    auto c = init_communicator(o);
    EXPECT_EQ(c->rank(), r);
    EXPECT_EQ(c->size(), 2);
    c->barrier();
  }));
  for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}) unsetenv(v);
}

TEST(InitMethods, EnvInitMethodReadsOpenMpiAndSlurm) {
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  InitOptions o;
  o.init_method = "env://";
  // No MASTER_ADDR: the error says so, after reading rank and size from Open MPI's variables.
  try {
    resolve_init_method(o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
  }
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  setenv("SLURM_PROCID", "1", 1);
  try {
    resolve_init_method(o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_NTASKS"), std::string::npos) << e.what();
  }
  unsetenv("SLURM_PROCID");
  o.init_method = "bogus://x";
  EXPECT_THROW(resolve_init_method(o), Error);
  o.init_method = "tcp://127.0.0.1:1";
  EXPECT_THROW(resolve_init_method(o), Error);  // no rank / world size
}

}  // namespace
}  // namespace engine::comm
