// tests/comm/test_mpi.cpp: the watchdog that bounds MPI's calls, and the MPI backend under a real
// mpirun: this binary runs itself as 2 and 3 ranks (MpiRank.DISABLED_*, run only there), which
// meet through MPI (env:// with no MASTER_*) and check every collective, raw buffers and Tensors,
// sync and async, odd sizes, every reduce op and dtype, against values unique to rank and
// position. Skipped with the reason when the build has no MPI or mpirun is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "comm/backends/mpi/mpi_backend.h"
#include "comm/backends/mpi/mpi_world.h"
#include "comm/health/call_watchdog.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/error.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/dtype_values.h"
#include "tests/common/mpirun.h"

using namespace engine;
using namespace engine::comm;
using engine::comm::testing::fval;
using engine::comm::testing::ival;

namespace {

// What a watchdog reported, waited for with a bound.
struct Expiries {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<WatchedCall> got;
  bool wait_for(size_t n, Millis bound) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, bound, [&] { return got.size() >= n; });
  }
  CallWatchdog::Expiry fn() {
    return [this](const WatchedCall& c) {
      std::lock_guard lk(mu);
      got.push_back(c);
      cv.notify_all();
    };
  }
};

WatchedCall call(uint64_t seq, Millis timeout) {
  WatchedCall c;
  c.what = "MPI_Allreduce";
  c.fp.seq = seq;
  c.fp.op = CollOp::AllReduce;
  c.fp.count = 7;
  c.timeout = timeout;
  return c;
}

}  // namespace

TEST(CallWatchdog, ReportsACallStillArmedAfterItsTimeout) {
  Expiries e;
  CallWatchdog w(e.fn());
  w.arm(call(4, Millis(30)));
  ASSERT_TRUE(e.wait_for(1, Millis(10000)));
  std::lock_guard lk(e.mu);
  ASSERT_EQ(e.got.size(), 1u);
  EXPECT_STREQ(e.got[0].what, "MPI_Allreduce");
  EXPECT_EQ(e.got[0].fp.seq, 4u);
  EXPECT_EQ(e.got[0].timeout, Millis(30));
}

TEST(CallWatchdog, CallsDisarmedInTimeAreNeverReported) {
  Expiries e;
  CallWatchdog w(e.fn());
  for (uint64_t seq = 1; seq <= 1000; ++seq) {  // the fast path: arm, disarm
    WatchScope s(&w, call(seq, Millis(40)));
  }
  // A later call that overruns: by the time it is reported, the earlier ones' deadlines (40 ms
  // after arming) have long passed, and none of them may have been reported.
  w.arm(call(2000, Millis(80)));
  ASSERT_TRUE(e.wait_for(1, Millis(10000)));
  w.disarm();
  std::lock_guard lk(e.mu);
  ASSERT_EQ(e.got.size(), 1u);
  EXPECT_EQ(e.got[0].fp.seq, 2000u);
}

TEST(CallWatchdog, AShorterDeadlineWakesItEarly) {
  Expiries e;
  CallWatchdog w(e.fn());
  {
    WatchScope s(&w, call(1, Millis(3600000)));  // it now sleeps for an hour
  }
  const auto t0 = Clock::now();
  w.arm(call(2, Millis(20)));
  ASSERT_TRUE(e.wait_for(1, Millis(10000)));
  EXPECT_LT(Clock::now() - t0, Millis(5000));
  EXPECT_EQ(e.got[0].fp.seq, 2u);
}

TEST(MpiBuild, BackendNeedsRanksStartedByMpirun) {
  // Not under mpirun: a clear error, without starting MPI.
  if (started_by_mpirun()) GTEST_SKIP() << "this process runs under mpirun";
  try {
    make_mpi_backend(0, 2, Millis(1000));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    if (mpi_built())
      EXPECT_NE(what.find("not started by mpirun"), std::string::npos) << what;
    else
      EXPECT_NE(what.find("ENGINE_MPI"), std::string::npos) << what;
  }
}

TEST(MpiBuild, WithoutMpiMpirunRanksAreToldToNameTheStore) {
  if (mpi_built()) GTEST_SKIP() << "this build has MPI (the ranks meet through it)";
  // Variables as mpirun sets them, no MASTER_*: the error says what to set and how to build.
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("PMIX_RANK", "0", 1);
  InitOptions o;
  try {
    resolve_init_method(o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MASTER_ADDR"), std::string::npos) << what;
    EXPECT_NE(what.find("-DENGINE_MPI=ON"), std::string::npos) << what;
  }
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"}) unsetenv(v);
}

// ------------------------------------------------------------------------------------------------
// Under mpirun

namespace {

// Raw-buffer collectives (through the CPU backend's host_buffers) at one size.
void check_raw(Communicator& c, size_t n) {
  const int r = c.rank(), w = c.size();
  std::vector<float> a(n), want(n);
  for (size_t i = 0; i < n; ++i) a[i] = fval(r, i);
  for (size_t i = 0; i < n; ++i) {
    want[i] = 0;
    for (int q = 0; q < w; ++q) want[i] += fval(q, i);
  }
  c.all_reduce(a.data(), n, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(a, want) << "all_reduce sum, count " << n;

  std::vector<int64_t> m(n), mwant(n);
  for (size_t i = 0; i < n; ++i) m[i] = ival((r + int(i)) % w, i);
  for (size_t i = 0; i < n; ++i) {
    int64_t best = INT64_MIN;
    for (int q = 0; q < w; ++q) best = std::max<int64_t>(best, ival((q + int(i)) % w, i));
    mwant[i] = best;
  }
  c.all_reduce(m.data(), n, DType::I64, ReduceOp::Max);
  EXPECT_EQ(m, mwant) << "all_reduce max i64, count " << n;

  const int root = w - 1;
  std::vector<float> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = fval(r, i);
  c.broadcast(b.data(), n, DType::F32, root);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], fval(root, i)) << "broadcast, count " << n;

  std::vector<int32_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = 1 + (r + int(i)) % 3;
  c.reduce(p.data(), n, DType::I32, ReduceOp::Prod, 1 % w);
  for (size_t i = 0; i < n; ++i) {
    int32_t prod = 1, own = 1 + (r + int(i)) % 3;
    for (int q = 0; q < w; ++q) prod *= 1 + (q + int(i)) % 3;
    ASSERT_EQ(p[i], r == 1 % w ? prod : own) << "reduce prod i32, count " << n;
  }
}

// The parted collectives on raw buffers: all_gather, gather, scatter, reduce_scatter.
void check_parts_raw(Communicator& c, size_t n) {
  const int r = c.rank(), w = c.size();
  std::vector<float> in(n), all(n * w), want(n * w);
  for (size_t i = 0; i < n; ++i) in[i] = fval(r, i);
  for (int q = 0; q < w; ++q)
    for (size_t i = 0; i < n; ++i) want[q * n + i] = fval(q, i);
  c.all_gather(in.data(), all.data(), n, DType::F32);
  EXPECT_EQ(all, want) << "all_gather, count " << n;

  std::vector<float> g(r == 0 ? n * w : 0);
  c.gather(in.data(), r == 0 ? g.data() : nullptr, n, DType::F32, 0);
  if (r == 0) {
    EXPECT_EQ(g, want) << "gather, count " << n;
  }

  std::vector<uint8_t> src(r == w - 1 ? n * w : 0), mine(n);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  c.scatter(r == w - 1 ? src.data() : nullptr, mine.data(), n, DType::U8, w - 1);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(mine[i], static_cast<uint8_t>((r * n + i) * 7 + 3)) << "scatter, count " << n;

  std::vector<float> whole(n * w), part(n);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = fval(r, i);
  c.reduce_scatter(whole.data(), part.data(), n, DType::F32, ReduceOp::Avg);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (int q = 0; q < w; ++q) sum += fval(q, r * n + i);
    ASSERT_FLOAT_EQ(part[i], sum / static_cast<float>(w)) << "reduce_scatter avg, count " << n;
  }
}

// Tensor overloads, async calls and NaN propagation of float max.
void check_tensors(Communicator& c, size_t n) {
  const int r = c.rank(), w = c.size();
  const int64_t len = static_cast<int64_t>(n);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = fval(r, i);
  Tensor t = Tensor::from_vector(v, {len});
  Work work = c.all_reduce_async(t, ReduceOp::Min);
  Tensor s = Tensor::from_vector(v, {len});
  c.broadcast_async(s, 0).wait();
  work.wait();
  std::vector<float> got = t.to_vector(), bs = s.to_vector();
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], fval(0, i)) << "all_reduce_async min, count " << n;
    ASSERT_EQ(bs[i], fval(0, i)) << "broadcast_async, count " << n;
  }
  Tensor out = Tensor::empty({len * w});
  c.all_gather(Tensor::from_vector(v, {len}), out);
  std::vector<float> all = out.to_vector();
  for (int q = 0; q < w; ++q)
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(all[q * n + i], fval(q, i)) << "all_gather tensor";
  Tensor nan = Tensor::full({3}, r == w - 1 ? NAN : float(r));
  c.all_reduce(nan, ReduceOp::Max);
  for (float x : nan.to_vector()) EXPECT_TRUE(std::isnan(x)) << "max lets a NaN win, as the ring";
}

}  // namespace

// Every dtype and op on all_reduce and reduce: the 16-bit floats travel as MPI_UINT16_T and
// reduce through our own MPI operations.
void check_dtypes_raw(Communicator& c, size_t n) {
  using namespace engine::comm::testing;
  const int r = c.rank(), w = c.size();
  for (DType dt : all_dtypes())
    for (ReduceOp op : ops_for(dt)) {
      auto b = tbuf(dt, n, r, op);
      c.all_reduce(b.data(), n, dt, op);
      EXPECT_EQ(tcheck(dt, b.data(), n, [&](size_t i) { return texpect(dt, w, i, op); }), "")
          << "all_reduce " << reduce_op_name(op) << ", count " << n;
      b = tbuf(dt, n, r, op);
      c.reduce(b.data(), n, dt, op, 0);
      EXPECT_EQ(tcheck(dt, b.data(), n,
                       [&](size_t i) { return r == 0 ? texpect(dt, w, i, op) : tval(r, i, op); }),
                "")
          << "reduce " << reduce_op_name(op) << ", count " << n;
    }
}

// Runs as each rank of `mpirun -np W` (MpiRun below); skipped elsewhere.
TEST(MpiRank, DISABLED_EveryCollectiveOnTheMpiBackend) {
  if (!started_by_mpirun()) GTEST_SKIP() << "runs as a rank of mpirun (MpiRun starts it)";
  InitOptions o;  // env://, no MASTER_*: the ranks meet through MPI
  o.connect.timeout = Millis(30000);
  auto c = init_communicator(o);
  c->set_backend(DeviceKind::CPU, make_mpi_backend(c->rank(), c->size(), Millis(30000)));
  EXPECT_EQ(c->host_path(), "mpi");
  for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(4), size_t(13), size_t(1031),
                   size_t(65537)}) {
    check_raw(*c, n);
    check_parts_raw(*c, n);
    check_dtypes_raw(*c, n);
    if (n > 0) check_tensors(*c, n);
    c->barrier();
  }
  c.reset();
  mpi_finalize();
}

namespace {
std::string self_path() {
  char buf[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : "";
}
}  // namespace

TEST(MpiRun, EveryCollectiveOfTheMpiBackendUnderMpirun) {
  if (!mpi_built()) GTEST_SKIP() << mpi_build_hint();
  if (!engine::testing::have_mpirun())
    GTEST_SKIP() << "mpirun is not installed (Debian: openmpi-bin)";
  for (int world : {2, 3}) {
    const engine::testing::RunResult r =
        engine::testing::run(engine::testing::mpirun_command(world, 120) + " " + self_path() +
                             " --gtest_filter=MpiRank.DISABLED_EveryCollectiveOnTheMpiBackend "
                             "--gtest_also_run_disabled_tests --gtest_color=no");
    EXPECT_EQ(r.code, 0) << r.output;
    size_t passed = 0;
    for (size_t at = r.output.find("[  PASSED  ] 1 test"); at != std::string::npos;
         at = r.output.find("[  PASSED  ] 1 test", at + 1))
      ++passed;
    EXPECT_EQ(passed, static_cast<size_t>(world)) << r.output;
  }
}
