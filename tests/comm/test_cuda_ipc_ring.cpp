// tests/comm/test_cuda_ipc_ring.cpp: the CUDA IPC ring (comm/backends/cuda_ipc/cuda_ipc_ring.h).
//  - On the CPU, always: the kernel's unit decoding is comm/algorithms/ring_schedule.h's
//    RingSchedule (every unit and segment, W = 1..8); the kernel's schedule (its unit, span, flag
//    and element helpers) simulated with ranks and blocks interleaved at random: results, and that
//    no staging is overwritten before its reader consumed it, over many calls of changing sizes.
//  - Without a device: the constructor throws an engine::Error about CUDA.
//  - On GPUs: ranks as processes (this binary started afresh per rank, see run_ranks; rank r on
//    device r % devices, IPC between processes of one device works too) meeting through a file
//    store: every op, counts 0, 1, W-1, W+1, 1013, 2^20+3, several segment sizes and block counts,
//    unaligned buffers, consecutive calls; a rank that does not call makes the others throw
//    TimeoutError naming it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <tuple>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/backends/cuda_ipc/ipc_ring_kernel.cuh"
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

// ---- The schedule, simulated on the CPU ---------------------------------------------------------

template <int kKind>
float sim_elem(ReduceOp op, float in, float local, int world) {
  const bool avg = op == ReduceOp::Avg;
  const float w = static_cast<float>(world);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return ipc::ring_elem<kKind>(kernels::SumOp{}, in, local, avg, w);
    case ReduceOp::Prod:
      return ipc::ring_elem<kKind>(kernels::ProdOp{}, in, local, avg, w);
    case ReduceOp::Max:
      return ipc::ring_elem<kKind>(kernels::MaxOp{}, in, local, avg, w);
    case ReduceOp::Min:
      return ipc::ring_elem<kKind>(kernels::MinOp{}, in, local, avg, w);
  }
  return 0.f;
}

float sim_elem(int kind, ReduceOp op, float in, float local, int world) {
  switch (kind) {
    case ipc::UnitKind::Send:
      return sim_elem<ipc::UnitKind::Send>(op, in, local, world);
    case ipc::UnitKind::Reduce:
      return sim_elem<ipc::UnitKind::Reduce>(op, in, local, world);
    case ipc::UnitKind::Final:
      return sim_elem<ipc::UnitKind::Final>(op, in, local, world);
    case ipc::UnitKind::Copy:
      return sim_elem<ipc::UnitKind::Copy>(op, in, local, world);
    default:
      return sim_elem<ipc::UnitKind::LastCopy>(op, in, local, world);
  }
}

struct Call {
  int64_t count;
  ReduceOp op;
};

// The kernel's control flow (ipc_ring_kernel) step by step: one step of a block is its wait for
// next's done counters, one segment of one unit, or its final done write. Each rank runs the calls
// in order, a call starting once all its blocks finished the previous one (the host waits).
class RingSim {
 public:
  RingSim(int world, std::vector<int> blocks, int64_t seg_elems, std::vector<Call> calls)
      : world_(world), blocks_(std::move(blocks)), seg_(seg_elems), calls_(std::move(calls)) {
    int64_t cap = 0;
    for (const Call& c : calls_)
      cap = std::max(cap, static_cast<int64_t>(ipc::ring_schedule(c.count, 0, world).max_chunk()));
    nseg_cap_ = (cap + seg_ - 1) / seg_;
    ranks_.resize(world);
    for (int r = 0; r < world; ++r) {
      Rank& R = ranks_[r];
      R.rs.assign(world * cap, 0.f);
      R.ag.assign(world * cap, 0.f);
      R.rs_pending.assign(world * cap, 0);
      R.ag_pending.assign(world * cap, 0);
      R.flags.assign(2 * world * nseg_cap_, 0);
      R.done.assign(ipc::kMaxBlocks, 0);
      R.blocks.assign(blocks_[r], Block{});
      start_call(r);
    }
  }

  // Runs every rank's calls to the end in a random interleaving; "" or what went wrong. Blocks
  // run at different speeds and stall at random, so that some lag far behind the others.
  std::string run(std::mt19937& rng) {
    std::vector<std::pair<int, int>> order;
    for (int r = 0; r < world_; ++r)
      for (int b = 0; b < blocks_[r]; ++b) order.emplace_back(r, b);
    std::vector<int> speed(order.size());
    for (int& s : speed) s = 1 + static_cast<int>(rng() % 8);
    for (;;) {
      bool all_done = true, progress = false;
      for (const Rank& R : ranks_) all_done = all_done && R.call >= calls_.size();
      if (all_done) return "";
      std::vector<size_t> idx(order.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      std::shuffle(idx.begin(), idx.end(), rng);
      const bool stalls = rng() % 2 == 0;  // in a pass without stalls every block may move
      for (size_t i : idx) {
        if (stalls && rng() % 3 == 0) continue;
        const auto [r, b] = order[i];
        const int steps = 1 + static_cast<int>(rng() % speed[i]);
        for (int s = 0; s < steps; ++s) {
          const int st = step(r, b);
          if (st < 0) return error_;
          if (st == 0) break;
          progress = true;
        }
      }
      if (!progress && !stalls) return "deadlock: no block can move";
    }
  }

 private:
  struct Block {
    int stage = 0;  // 0: waiting for next's done counters, 1: units, 2: finished this call
    int u = 0;
    int64_t j = 0;
  };
  struct Rank {
    std::vector<float> data, rs, ag;
    std::vector<char> rs_pending, ag_pending;  // written by prev, not yet read
    std::vector<uint64_t> flags, done;
    std::vector<Block> blocks;
    size_t call = 0;
    int finished = 0;
  };

  void start_call(int r) {
    Rank& R = ranks_[r];
    R.finished = 0;
    for (Block& B : R.blocks) B = Block{};
    if (R.call >= calls_.size()) return;
    const Call& c = calls_[R.call];
    R.data.resize(c.count);
    for (int64_t i = 0; i < c.count; ++i) R.data[i] = value(c.op, r, i, static_cast<int>(R.call));
  }

  int fail(const std::string& why) {
    error_ = why;
    return -1;
  }

  // 1: moved, 0: blocked (or nothing left), -1: a protocol violation (error_).
  int step(int r, int b) {
    Rank& R = ranks_[r];
    if (R.call >= calls_.size()) return 0;
    Block& B = R.blocks[b];
    if (B.stage == 2) return 0;
    const Call& c = calls_[R.call];
    const uint64_t seq = R.call + 1;
    const int next = (r + 1) % world_, prev = (r - 1 + world_) % world_;
    const std::string at = "rank " + std::to_string(r) + " block " + std::to_string(b) + " call " +
                           std::to_string(seq) + ": ";
    if (B.stage == 0) {
      for (int k = 0; k < blocks_[next]; ++k)
        if (R.done[k] < seq - 1) return 0;
      B.stage = 1;
      B.j = b;
      return 1;
    }
    const RingSchedule sched = ipc::ring_schedule(c.count, r, world_);
    const auto nseg = static_cast<int64_t>(sched.segments(static_cast<size_t>(seg_)));
    ipc::RingSpan span{0, 0};
    while (B.u < 2 * world_ - 1) {
      const ipc::RingUnit unit = ipc::ring_unit(sched, B.u);
      if (B.j < nseg) {
        span = ipc::ring_span(sched, unit.chunk, B.j, seg_);
        if (span.lo < span.hi) break;
      }
      ++B.u;
      B.j = b;
    }
    if (B.u == 2 * world_ - 1) {
      ranks_[prev].done[b] = seq;
      B.stage = 2;
      if (++R.finished == blocks_[r]) {
        for (int64_t i = 0; i < c.count; ++i) {
          const float e = expected(c.op, world_, i, static_cast<int>(R.call));
          if (R.data[i] != e)
            return fail(at + "element " + std::to_string(i) + " is " + std::to_string(R.data[i]) +
                        ", expected " + std::to_string(e));
        }
        ++R.call;
        start_call(r);
      }
      return 1;
    }
    const ipc::RingUnit unit = ipc::ring_unit(sched, B.u);
    if (unit.kind != ipc::UnitKind::Send &&
        R.flags[ipc::ring_flag_index(ipc::ring_in_phase(B.u, world_), unit.chunk, B.j, world_,
                                     nseg_cap_)] < seq)
      return 0;
    Rank& N = ranks_[next];
    const bool from_rs = unit.kind == ipc::UnitKind::Reduce || unit.kind == ipc::UnitKind::Final;
    const bool to_rs = unit.kind == ipc::UnitKind::Send || unit.kind == ipc::UnitKind::Reduce;
    for (int64_t i = span.lo; i < span.hi; ++i) {
      float in = 0.f;
      if (unit.kind != ipc::UnitKind::Send) {
        std::vector<char>& pending = from_rs ? R.rs_pending : R.ag_pending;
        if (!pending[i]) return fail(at + "reads staging element " + std::to_string(i) + " stale");
        pending[i] = 0;
        in = from_rs ? R.rs[i] : R.ag[i];
      }
      const float v = sim_elem(unit.kind, c.op, in, R.data[i], world_);
      if (unit.kind == ipc::UnitKind::Final || unit.kind == ipc::UnitKind::Copy ||
          unit.kind == ipc::UnitKind::LastCopy)
        R.data[i] = v;
      if (unit.kind != ipc::UnitKind::LastCopy) {
        std::vector<char>& pending = to_rs ? N.rs_pending : N.ag_pending;
        if (pending[i])
          return fail(at + "overwrites staging element " + std::to_string(i) + " of rank " +
                      std::to_string(next) + " before it was read");
        pending[i] = 1;
        (to_rs ? N.rs : N.ag)[i] = v;
      }
    }
    if (unit.kind != ipc::UnitKind::LastCopy) {
      uint64_t& flag = N.flags[ipc::ring_flag_index(ipc::ring_out_phase(B.u, world_), unit.chunk,
                                                    B.j, world_, nseg_cap_)];
      if (flag >= seq) return fail(at + "sets a flag twice");
      flag = seq;
    }
    B.j += blocks_[r];
    return 1;
  }

  int world_;
  std::vector<int> blocks_;
  int64_t seg_;
  std::vector<Call> calls_;
  int64_t nseg_cap_ = 0;
  std::vector<Rank> ranks_;
  std::string error_;
};

TEST(IpcRingSchedule, SimulatedRingReducesAndNeverOverwritesUnreadStaging) {
  std::mt19937 rng(1234);
  for (int W : {2, 3, 4, 5, 8}) {
    std::vector<Call> calls;
    int k = 0;
    for (int64_t n : {int64_t(1), int64_t(W - 1), int64_t(W + 1), int64_t(13), int64_t(1013),
                      int64_t(3), int64_t(4099), int64_t(1013)})
      if (n > 0) calls.push_back({n, kOps[k++ % 5]});
    for (int64_t seg : {4, 8, 64, 1024}) {
      std::vector<std::vector<int>> grids = {std::vector<int>(W, 1), std::vector<int>(W, 3)};
      std::vector<int> mixed(W);
      for (int r = 0; r < W; ++r) mixed[r] = 1 + (r * 5 + 2) % 4;  // ranks with different grids
      grids.push_back(mixed);
      for (const auto& blocks : grids) {
        RingSim sim(W, blocks, seg, calls);
        EXPECT_EQ(sim.run(rng), "") << "W=" << W << " seg=" << seg << " blocks[0]=" << blocks[0];
      }
    }
  }
}

TEST(IpcRingSchedule, ChunksAreAlignedAndCoverTheBuffer) {
  for (int W : {1, 2, 3, 7, 8})
    for (int64_t n : {1, 2, 3, 5, 1013, 1 << 20})
      for (int64_t seg : {4, 12, 256}) {
        const RingSchedule sched = ipc::ring_schedule(n, 0, W);
        const auto nseg = static_cast<int64_t>(sched.segments(static_cast<size_t>(seg)));
        EXPECT_EQ(sched.max_chunk() % 4, 0u);
        EXPECT_GE(static_cast<int64_t>(sched.max_chunk()) * W, n);
        int64_t covered = 0;
        for (int c = 0; c < W; ++c)
          for (int64_t j = 0; j < nseg; ++j) {
            const ipc::RingSpan s = ipc::ring_span(sched, c, j, seg);
            if (s.lo >= s.hi) break;
            EXPECT_EQ(s.lo, covered) << "W=" << W << " n=" << n << " seg=" << seg;
            EXPECT_EQ(s.lo % 4, 0);
            covered = s.hi;
          }
        EXPECT_EQ(covered, n) << "W=" << W << " n=" << n << " seg=" << seg;
      }
}

// The kernel's unit decoding is the shared ring schedule: for every rank, unit and segment, the
// chunk the kernel moves is the one the schedule's step sends (the last unit: the one its last
// step received), and the elements are the schedule's segment of that chunk; the chunks are
// as comm/backends/cuda_ipc/cuda_ipc_ring.h describes.
TEST(IpcRingSchedule, KernelUnitsAreTheRingSchedule) {
  std::vector<int64_t> counts;
  for (int W = 1; W <= 8; ++W) {
    counts.clear();
    for (int64_t n = 0; n <= 4 * W + 3; ++n) counts.push_back(n);
    for (int64_t n : {1013, 4099, (1 << 20) + 3, (3 << 22) + 1}) counts.push_back(n);
    for (int64_t n : counts)
      for (int r = 0; r < W; ++r) {
        const RingSchedule kernel = ipc::ring_schedule(n, r, W);
        const RingSchedule host(r, W, static_cast<size_t>(n), 0, 4);
        for (int u = 0; u < 2 * W - 1; ++u) {
          const ipc::RingUnit unit = ipc::ring_unit(kernel, u);
          const int g = u < 2 * W - 2 ? u : 2 * W - 3;
          const int want = u < 2 * W - 2 ? host.send_chunk(host.phase_of(g), host.phase_step(g))
                                         : host.recv_chunk(host.phase_of(g), host.phase_step(g));
          ASSERT_EQ(unit.chunk, W == 1 ? 0 : want) << "W=" << W << " n=" << n << " u=" << u;
          if (u > 0 && W > 1) {  // what unit u moves is what step u-1 brought in
            ASSERT_EQ(unit.chunk, host.recv_chunk(host.phase_of(u - 1), host.phase_step(u - 1)));
          }
          // The units as comm/backends/cuda_ipc/cuda_ipc_ring.h spells them out: r, r-s, r+1,
          // r+1-t, r+2 (mod W).
          const int spelled = u == 0          ? r
                              : u < W - 1     ? r - u
                              : u == W - 1    ? r + 1
                              : u < 2 * W - 2 ? r + 1 - (u - W + 1)
                                              : r + 2;
          ASSERT_EQ(unit.chunk, ((spelled % W) + W) % W) << "W=" << W << " u=" << u;
          for (int64_t seg : {4, 8, 1024}) {
            if (n > 5000 && seg < 1024) continue;  // many tiny segments say nothing new
            const size_t nseg = kernel.segments(static_cast<size_t>(seg));
            ASSERT_EQ(nseg, host.segments(static_cast<size_t>(seg)));
            for (size_t j = 0; j < nseg; ++j) {
              const ipc::RingSpan span = ipc::ring_span(kernel, unit.chunk, j, seg);
              const Range want_seg = host.segment(unit.chunk, j, static_cast<size_t>(seg));
              ASSERT_EQ(span.lo, static_cast<int64_t>(want_seg.begin)) << "W=" << W << " n=" << n;
              ASSERT_EQ(span.hi, static_cast<int64_t>(want_seg.end)) << "W=" << W << " n=" << n;
            }
          }
        }
      }
  }
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
      o.key = "small_segments";
      o.segment_bytes = 256;
      o.blocks = 3;
      CudaIpcRing ring(store, r, W, dev, o);
      for (size_t n : {size_t(W + 1), size_t(1013), size_t(70001), size_t(5000)})
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
          for (int rep = 0; rep < 2; ++rep) check_all_reduce(ring, W, n, op, call++, rep == 1);
    }
    {
      o.key = "one_block";
      o.segment_bytes = 4096;
      o.blocks = 1;
      CudaIpcRing ring(store, r, W, dev, o);
      for (size_t n : {size_t((1 << 20) + 3), size_t(1013)})
        for (ReduceOp op : {ReduceOp::Avg, ReduceOp::Min})
          for (bool unaligned : {false, true}) check_all_reduce(ring, W, n, op, call++, unaligned);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CudaIpcRingGpu, ::testing::Values(2, 3),
                         [](const auto& p) { return "W" + std::to_string(p.param); });

// The stream-ordered protocols (comm/backends/cuda_ipc/proto_ring.h): (W, protocol).
class CudaIpcRingProtocols : public ::testing::TestWithParam<std::tuple<int, IpcProtocol>> {};

TEST_P(CudaIpcRingProtocols, AllReduceMatchesTheCpu) {
  SKIP_WITHOUT_IPC();
  const auto [W, protocol] = GetParam();
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
    o.key = "mismatch";
    o.segment_bytes = r == 0 ? 4096 : 8192;
    expect_error([&] { CudaIpcRing ring(store, r, W, dev, o); }, "segment_bytes");
    o.key = "misuse";
    o.segment_bytes = 4096;
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
  bool skip_first;  // the idle rank skips the first call (the region exchange waits) or the second
};
class CudaIpcRingTimeout : public ::testing::TestWithParam<TimeoutCase> {};

// The last rank does not call: the others throw TimeoutError within the timeout (plus the host's
// grace), rank 0's naming the idle rank as its prev; later calls say the ring is broken.
TEST_P(CudaIpcRingTimeout, MissingRankIsNamed) {
  SKIP_WITHOUT_IPC();
  const auto [W, skip_first] = GetParam();
  run_ranks(W, 120, [&](int r, int dev, const std::shared_ptr<Store>& store) {
    IpcRingOptions o;
    o.timeout = Millis(1500);
    o.key = "timeout";
    CudaIpcRing ring(store, r, W, dev, o);
    const int idle = W - 1;
    if (!skip_first) check_all_reduce(ring, W, 1013, ReduceOp::Sum, 0, false);
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
    } catch (const TimeoutError& e) {
      msg = e.what();
    }
    const auto took = Clock::now() - t0;
    if (msg.empty())
      throw Error(detail::concat("rank ", r, ": no TimeoutError without rank ", idle));
    if (r == 0 && !has(msg, "rank " + std::to_string(idle) + " (prev)"))
      throw Error("rank 0's error does not name rank " + std::to_string(idle) + ": " + msg);
    if (took > Millis(8000))
      throw Error(detail::concat("rank ", r, ": the timeout took ",
                                 std::chrono::duration_cast<Millis>(took).count(), " ms: ", msg));
    if (!ring.broken()) throw Error("not broken after a timeout");
    bool refused = false;
    try {
      ring.all_reduce(t);
    } catch (const Error& e) {
      refused = has(e.what(), "broken");
    }
    if (!refused) throw Error("a broken ring took another call");
    store->set("left/" + std::to_string(r), "1");
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaIpcRingTimeout,
                         ::testing::Values(TimeoutCase{2, false}, TimeoutCase{3, false},
                                           TimeoutCase{3, true}),
                         [](const auto& p) {
                           return "W" + std::to_string(p.param.world) +
                                  (p.param.skip_first ? "_first_call" : "_second_call");
                         });

}  // namespace
}  // namespace engine::comm
