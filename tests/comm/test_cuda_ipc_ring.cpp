// tests/comm/test_cuda_ipc_ring.cpp: the CUDA IPC ring (comm/backends/cuda_ipc/cuda_ipc_ring.h).
// The protocols' and the event chain's logic runs on the CPU in test_ipc_protocols.cpp and
// test_ipc_event_chain.cpp; here:
//  - Without a device: the constructor throws an engine::Error about CUDA.
//  - On GPUs: ranks as processes (this binary started afresh per rank, see run_ranks; rank r on
//    device r % devices, IPC between processes of one device works too) meeting through a file
//    store: every op, counts 0, 1, W-1, W+1, 1013, 2^20+3, every protocol and a one-channel
//    geometry, unaligned buffers, consecutive calls; mismatched options fail at construction; a
//    rank that does not call makes the others throw TimeoutError naming it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>
#include <tuple>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/rendezvous/file_store.h"
#include "comm/rendezvous/mem_store.h"
#include "core/cuda_backend.h"
#include "core/error.h"
#include "tests/comm/comm_test_util.h"
#include "tests/common/temp_dir.h"

namespace engine::comm {
namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min,
                             ReduceOp::Prod};

// Exact in float32 whatever the order of the reduction: integers below 2^24 for sums, powers of
// two for products.
float value(ReduceOp op, int rank, size_t i, int call) {
  if (op == ReduceOp::Prod)
    return std::ldexp(1.0f, static_cast<int>((i + 3 * rank + call) % 7) - 3);
  return testing::fval(rank, i + 7 * static_cast<size_t>(call));
}

float expected(ReduceOp op, int world, size_t i, int call) {
  float e = value(op, 0, i, call);
  for (int q = 1; q < world; ++q) {
    const float v = value(op, q, i, call);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        e += v;
        break;
      case ReduceOp::Prod:
        e *= v;
        break;
      case ReduceOp::Max:
        e = std::max(e, v);
        break;
      case ReduceOp::Min:
        e = std::min(e, v);
        break;
    }
  }
  return op == ReduceOp::Avg ? e / static_cast<float>(world) : e;
}

// ---- Processes ------------------------------------------------------------------------------

struct Probe {
  int devices = 0;
  std::string reason;  // unavailable_reason() without a device, else unsupported_reason(0)
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    r.devices = cuda::device_count();
    r.reason = r.devices == 0 ? cuda::unavailable_reason() : CudaIpcRing::unsupported_reason(0);
    return r;
  }();
  return p;
}

// Set in a rank process (run_ranks): its rank, device and store directory.
struct RankEnv {
  int rank = -1, device = 0;
  std::string dir;
};

RankEnv rank_env() {
  RankEnv e;
  const char* r = std::getenv("ENGINE_TEST_IPC_RING_RANK");
  const char* d = std::getenv("ENGINE_TEST_IPC_RING_DEVICE");
  const char* dir = std::getenv("ENGINE_TEST_IPC_RING_DIR");
  if (r && d && dir) {
    e.rank = std::atoi(r);
    e.device = std::atoi(d);
    e.dir = dir;
  }
  return e;
}

// In the test process only (a rank process is past these checks: its parent made them).
#define SKIP_WITHOUT_IPC()                                                 \
  do {                                                                     \
    if (rank_env().rank < 0) {                                             \
      if (probe().devices == 0) GTEST_SKIP() << probe().reason;            \
      if (!probe().reason.empty() && !has(probe().reason, "as a peer"))    \
        GTEST_SKIP() << "CUDA IPC is not usable here: " << probe().reason; \
    }                                                                      \
  } while (0)

// fn(rank, device, store) in W rank processes meeting through a fresh file store. Each rank is
// this test binary started afresh (fork and exec) running only the current test, which calls
// run_ranks again and, seeing the rank in its environment, runs fn and exits: a forked child
// could not use CUDA if this process had initialised it. Rank r takes device r % devices, or
// device 0 for all when the GPUs lack P2P (IPC within one device works). A rank's error is on
// stderr ("[rank R] ...").
void run_ranks(int W, int timeout_s,
               const std::function<void(int, int, const std::shared_ptr<Store>&)>& fn) {
  const RankEnv env = rank_env();
  if (env.rank >= 0) {
    int code = 0;
    try {
      auto store = std::make_shared<FileStore>(env.dir, Millis(30000));
      fn(env.rank, env.device, store);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] %s\n", env.rank, e.what());
      code = 1;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }
  const engine::testing::TempDir tmp;
  const std::filesystem::path& dir = tmp.path();
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < W; ++r) {
    const int device = probe().reason.empty() ? r % probe().devices : 0;
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("ENGINE_TEST_IPC_RING_RANK", std::to_string(r).c_str(), 1);
      setenv("ENGINE_TEST_IPC_RING_DEVICE", std::to_string(device).c_str(), 1);
      setenv("ENGINE_TEST_IPC_RING_DIR", dir.c_str(), 1);
      for (const char* v : {"GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "GTEST_OUTPUT"}) unsetenv(v);
      const int null_fd = ::open("/dev/null", O_WRONLY);  // gtest's banner; errors go to stderr
      if (null_fd >= 0) dup2(null_fd, STDOUT_FILENO);
      char* argv[] = {const_cast<char*>("test_comm"), const_cast<char*>(filter.c_str()), nullptr};
      execv("/proc/self/exe", argv);
      std::fprintf(stderr, "[rank %d] execv(/proc/self/exe) failed\n", r);
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  const std::vector<int> codes = testing::wait_children(pids, timeout_s);
  for (int r = 0; r < W; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " (its error is above)";
}

// One all_reduce of n floats at 1 float past a 256-byte aligned allocation when `unaligned`
// (the scalar path), with sentinels around it; throws on any wrong element.
void check_all_reduce(CudaIpcRing& ring, int W, size_t n, ReduceOp op, int call, bool unaligned,
                      const cuda::Event* ready = nullptr) {
  const int r = ring.rank();
  if (n == 0) {
    ring.all_reduce(nullptr, 0, DType::F32, op);
    return;
  }
  const size_t off = unaligned ? 1 : 0;
  std::vector<float> h(off + n + 4, -1.0f);
  for (size_t i = 0; i < n; ++i) h[off + i] = value(op, r, i, call);
  Tensor whole =
      Tensor::from_vector(h, {static_cast<int64_t>(h.size())}, Device::cuda(ring.device()));
  Tensor t = whole.flat_slice(static_cast<int64_t>(off), static_cast<int64_t>(n));
  ring.all_reduce(t, op, ready);
  const std::vector<float> got = whole.to_vector();
  const std::string at =
      detail::concat("rank ", r, ": all_reduce(", n, " floats, ", reduce_op_name(op), ") #", call,
                     unaligned ? " unaligned" : "", ": ");
  for (size_t i = 0; i < off; ++i)
    if (got[i] != -1.0f) throw Error(at + "wrote before the buffer");
  for (size_t i = off + n; i < got.size(); ++i)
    if (got[i] != -1.0f) throw Error(at + "wrote past the end of the buffer");
  for (size_t i = 0; i < n; ++i) {
    const float e = expected(op, W, i, call);
    if (got[off + i] != e)
      throw Error(detail::concat(at, "element ", i, " is ", got[off + i], ", expected ", e));
  }
}

TEST(CudaIpcRing, WithoutCudaTheConstructorThrows) {
  if (probe().devices > 0) GTEST_SKIP() << "a CUDA device answers";
  auto store = std::make_shared<MemStore>(Millis(1000));
  try {
    CudaIpcRing ring(store, 0, 2, 0);
    ADD_FAILURE() << "the constructor did not throw";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "CUDA")) << e.what();
  }
  EXPECT_NE(CudaIpcRing::unsupported_reason(0), "");
}

// The harness of the GPU tests, without a GPU: rank processes start, find their rank and meet.
TEST(CudaIpcRingRanks, RankProcessesMeetThroughTheStore) {
  const int W = 3;
  run_ranks(W, 60, [&](int r, int, const std::shared_ptr<Store>& store) {
    store->set("hello/" + std::to_string(r), std::to_string(r * r));
    for (int q = 0; q < W; ++q)
      if (store->get("hello/" + std::to_string(q)) != std::to_string(q * q))
        throw Error("rank " + std::to_string(r) + " read a wrong value of rank " +
                    std::to_string(q));
  });
}

class CudaIpcRingGpu : public ::testing::TestWithParam<int> {};

TEST_P(CudaIpcRingGpu, AllReduceMatchesTheCpu) {
  SKIP_WITHOUT_IPC();
  const int W = GetParam();
  run_ranks(W, 300, [&](int r, int dev, const std::shared_ptr<Store>& store) {
    IpcRingOptions o;
    o.timeout = Millis(30000);
    int call = 0;
    {
      o.key = "default";
      CudaIpcRing ring(store, r, W, dev, o);
      for (size_t n : {size_t(0), size_t(1), size_t(W - 1), size_t(W + 1), size_t(1013),
                       size_t((1 << 20) + 3)})
        for (ReduceOp op : kOps)
          for (int rep = 0; rep < 2; ++rep) check_all_reduce(ring, W, n, op, call++, false);
      // Smaller again (same region, other chunk layout), unaligned, and after an event.
      for (size_t n : {size_t(1013), size_t(W + 1), size_t((1 << 20) + 3)})
        check_all_reduce(ring, W, n, ReduceOp::Sum, call++, true);
      const cuda::Event ready = cuda::Event::record(dev, cuda::Stream::Compute);
      check_all_reduce(ring, W, 4099, ReduceOp::Max, call++, false, &ready);
      if (ring.broken()) throw Error("ring broken after successful calls");
    }
    {
      o.key = "one_channel";
      o.protocol = IpcProtocol::Simple;
      o.channels = 1;
      o.slot_bytes = 4096;
      CudaIpcRing ring(store, r, W, dev, o);
      for (size_t n : {size_t((1 << 20) + 3), size_t(1013)})
        for (ReduceOp op : {ReduceOp::Avg, ReduceOp::Min})
          for (bool unaligned : {false, true}) check_all_reduce(ring, W, n, op, call++, unaligned);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CudaIpcRingGpu, ::testing::Values(2, 3),
                         [](const auto& p) { return "W" + std::to_string(p.param); });

// Each protocol asked for by name (comm/backends/cuda_ipc/queued_ring.h): (W, protocol).
class CudaIpcRingProtocols : public ::testing::TestWithParam<std::tuple<int, IpcProtocol>> {};

TEST_P(CudaIpcRingProtocols, AllReduceMatchesTheCpu) {
  SKIP_WITHOUT_IPC();
  // Plain variables, not a structured binding: clang 14 (the sanitizer builds') cannot capture one.
  const int W = std::get<0>(GetParam());
  const IpcProtocol protocol = std::get<1>(GetParam());
  run_ranks(W, 300, [&](int r, int dev, const std::shared_ptr<Store>& store) {
    IpcRingOptions o;
    o.timeout = Millis(30000);
    o.protocol = protocol;
    o.key = std::string("proto_") + ipc_protocol_name(protocol);
    o.channels = 3;
    o.slot_bytes = 4096;  // many slots per call: the FIFOs wrap
    o.ll_max_bytes = 8192;
    CudaIpcRing ring(store, r, W, dev, o);
    if (ring.mode() != "concurrent" && ring.mode() != "time-sliced")
      throw Error("mode '" + ring.mode() + "'");
    int call = 0;
    for (size_t n : {size_t(1), size_t(W + 1), size_t(1013), size_t(70001), size_t((1 << 20) + 3)})
      for (ReduceOp op : kOps) check_all_reduce(ring, W, n, op, call++, n == 1013);
    ring.check();
  });
}

INSTANTIATE_TEST_SUITE_P(Protocols, CudaIpcRingProtocols,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values(IpcProtocol::Ll, IpcProtocol::Simple,
                                                              IpcProtocol::Auto,
                                                              IpcProtocol::Events)),
                         [](const auto& p) {
                           return "W" + std::to_string(std::get<0>(p.param)) + "_" +
                                  ipc_protocol_name(std::get<1>(p.param));
                         });

// A rank calling with another count: both ranks' calls fail at once, each naming the other.
TEST(CudaIpcRingProtocolsRanks, MismatchedCountNamesThePeer) {
  SKIP_WITHOUT_IPC();
  const int W = 2;
  run_ranks(W, 120, [&](int r, int dev, const std::shared_ptr<Store>& store) {
    IpcRingOptions o;
    o.timeout = Millis(20000);
    o.protocol = IpcProtocol::Simple;
    o.key = "proto_mismatch";
    CudaIpcRing ring(store, r, W, dev, o);
    Tensor t = Tensor::zeros({r == 0 ? 100 : 150}, DType::F32, Device::cuda(dev));
    ring.all_reduce(t, ReduceOp::Sum);
    (void)t.to_vector();  // the kernel ended (it gave up at once)
    try {
      ring.check();
      throw Error("rank " + std::to_string(r) + ": no error");
    } catch (const TimeoutError& e) {
      if (!has(e.what(), "rank " + std::to_string(1 - r)) || !has(e.what(), "called all_reduce"))
        throw Error(std::string("rank ") + std::to_string(r) + ": " + e.what());
    }
  });
}

TEST(CudaIpcRingRanks, OneRankLeavesTheBufferAsItIs) {
  SKIP_WITHOUT_IPC();
  run_ranks(1, 60, [&](int r, int dev, const std::shared_ptr<Store>& store) {
    CudaIpcRing ring(store, r, 1, dev);
    int call = 0;
    for (ReduceOp op : kOps) check_all_reduce(ring, 1, 1013, op, call++, false);
  });
}

TEST(CudaIpcRingRanks, MisuseIsAClearError) {
  SKIP_WITHOUT_IPC();
  const int W = 2;
  run_ranks(W, 60, [&](int r, int dev, const std::shared_ptr<Store>& store) {
    auto expect_error = [&](const std::function<void()>& f, const std::string& part) {
      try {
        f();
      } catch (const Error& e) {
        if (!has(e.what(), part))
          throw Error(detail::concat("rank ", r, ": expected '", part, "' in: ", e.what()));
        return;
      }
      throw Error(detail::concat("rank ", r, ": no error (expected '", part, "')"));
    };
    IpcRingOptions o;
    o.timeout = Millis(5000);
    o.key = "mismatch_geometry";
    o.protocol = IpcProtocol::Simple;
    o.channels = r == 0 ? 2 : 4;
    expect_error([&] { CudaIpcRing ring(store, r, W, dev, o); }, "sized its region");
    o.key = "mismatch_protocol";
    o.channels = 2;
    o.protocol = r == 0 ? IpcProtocol::Ll : IpcProtocol::Simple;
    expect_error([&] { CudaIpcRing ring(store, r, W, dev, o); }, "every rank must choose the same");
    o.key = "misuse";
    o.protocol = IpcProtocol::Auto;
    CudaIpcRing ring(store, r, W, dev, o);
    expect_error([&] { ring.all_reduce(Tensor::full({4}, 1.0f)); }, "tensor on cpu");
    expect_error([&] { ring.all_reduce(Tensor::zeros({4}, DType::I64, Device::cuda(dev))); },
                 "float32");
    expect_error([&] { ring.all_reduce(nullptr, 4, DType::F32); }, "null buffer");
    check_all_reduce(ring, W, 1013, ReduceOp::Sum, 0, false);  // still usable
  });
}

struct TimeoutCase {
  int world;
  bool skip_first;  // the idle rank skips the first call (the set-up's waits) or the second
  IpcProtocol protocol;
};
class CudaIpcRingTimeout : public ::testing::TestWithParam<TimeoutCase> {};

// The last rank does not call: each other rank's call, or its check() soon after (the call is
// queued), throws TimeoutError within the timeout plus the host's grace, rank 0's naming the idle
// rank; the ring is then broken and refuses later calls.
TEST_P(CudaIpcRingTimeout, MissingRankIsNamed) {
  SKIP_WITHOUT_IPC();
  const TimeoutCase c = GetParam();
  const int W = c.world;
  run_ranks(W, 120, [&](int r, int dev, const std::shared_ptr<Store>& store) {
    IpcRingOptions o;
    o.timeout = Millis(1500);
    o.key = "timeout";
    o.protocol = c.protocol;
    CudaIpcRing ring(store, r, W, dev, o);
    const int idle = W - 1;
    if (!c.skip_first) check_all_reduce(ring, W, 1013, ReduceOp::Sum, 0, false);
    if (r == idle) {
      std::vector<std::string> keys;
      for (int q = 0; q < idle; ++q) keys.push_back("left/" + std::to_string(q));
      store->wait(keys, Millis(60000));
      return;
    }
    Tensor t = Tensor::full({1013}, 1.0f, Device::cuda(dev));
    const auto t0 = Clock::now();
    std::string msg;
    try {
      ring.all_reduce(t);
      while (Clock::now() - t0 < Millis(10000)) {
        ring.check();
        std::this_thread::sleep_for(Millis(10));
      }
    } catch (const TimeoutError& e) {
      msg = e.what();
    }
    const auto took = Clock::now() - t0;
    if (msg.empty())
      throw Error(detail::concat("rank ", r, ": no TimeoutError without rank ", idle));
    if (r == 0 && !has(msg, "rank " + std::to_string(idle)))
      throw Error("rank 0's error does not name rank " + std::to_string(idle) + ": " + msg);
    if (took > Millis(8000))
      throw Error(detail::concat("rank ", r, ": the timeout took ",
                                 std::chrono::duration_cast<Millis>(took).count(), " ms: ", msg));
    bool refused = false;
    for (int k = 0; k < 2 && !refused; ++k) {
      try {
        ring.all_reduce(t);
      } catch (const Error& e) {
        refused = ring.broken();
      }
    }
    if (!refused) throw Error("a failed ring took another call");
    store->set("left/" + std::to_string(r), "1");
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaIpcRingTimeout,
                         ::testing::Values(TimeoutCase{2, false, IpcProtocol::Auto},
                                           TimeoutCase{3, false, IpcProtocol::Auto},
                                           TimeoutCase{3, true, IpcProtocol::Auto},
                                           TimeoutCase{2, false, IpcProtocol::Simple},
                                           TimeoutCase{3, false, IpcProtocol::Events}),
                         [](const auto& p) {
                           return "W" + std::to_string(p.param.world) +
                                  (p.param.skip_first ? "_first_call_" : "_second_call_") +
                                  ipc_protocol_name(p.param.protocol);
                         });

}  // namespace
}  // namespace engine::comm
