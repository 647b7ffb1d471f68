// tests/comm/test_staged_pipeline.cpp: the pipelined staged all_reduce (--staged-pipeline N,
// comm/backends/staged/pipeline.h) on the CPU: the segment arithmetic, the schedule's order (what
// overlaps what), and the sums of ranks as threads over the in-memory transport, each rank's
// PipelineOps a fake whose copies run on two threads of their own (the download and upload
// streams' stand-ins) and which checks every slot goes down, waited, reduced, up, in that order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/backends/staged/pipeline.h"
#include "comm/transport/mem_transport.h"
#include "core/device.h"
#include "io/json.h"
#include "tests/comm/comm_test_util.h"
#include "tests/common/run.h"
#include "tests/common/temp_dir.h"

namespace engine::comm::staged {
namespace {

using testing::expect_no_errors;
using testing::fval;
using testing::run_threads;

TEST(StagedPipeline, CutCoversTheTensorInElementMultiples) {
  EXPECT_TRUE(cut(0, 4, 64, 16).empty());
  for (size_t elems : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(1000), size_t(4099)})
    for (size_t max_segs : {size_t(1), size_t(3), size_t(16)}) {
      const size_t bytes = elems * 4;
      const std::vector<Segment> s = cut(bytes, 4, 64, max_segs);
      ASSERT_FALSE(s.empty());
      EXPECT_LE(s.size(), max_segs);
      EXPECT_LE(s.size(), std::max<size_t>(1, bytes / 64)) << "segments under the minimum";
      size_t at = 0;
      for (const Segment& g : s) {
        EXPECT_EQ(g.offset, at) << elems << " elements";
        EXPECT_GT(g.bytes, 0u);
        EXPECT_EQ(g.bytes % 4, 0u);
        EXPECT_LE(g.bytes, s.front().bytes) << "the first segment is the largest";
        at += g.bytes;
      }
      EXPECT_EQ(at, bytes);
    }
  EXPECT_EQ(cut(1000, 4, 256 << 10, 16).size(), 1u);  // a small tensor: one segment
}

// Records the calls: D<slot> W<slot> R<slot> U<slot> F.
class Recorder final : public PipelineOps {
 public:
  void download(const Segment& seg, int slot) override { add("D", slot, seg); }
  void wait(int slot) override { log += "W" + std::to_string(slot) + " "; }
  void host_reduce(const Segment& seg, int slot) override { add("R", slot, seg); }
  void upload(int slot, const Segment& seg) override { add("U", slot, seg); }
  void finish() override { log += "F"; }
  std::string log;

 private:
  void add(const char* what, int slot, const Segment& seg) {
    log += what + std::to_string(slot) + ":" + std::to_string(seg.offset / 10) + " ";
  }
};

// Segment i + 1 is queued down before segment i is reduced; segment i + slots waits for the
// slot's upload of segment i (queued right after it); the host waits once per segment.
TEST(StagedPipeline, ScheduleOverlapsDownloadReduceAndUpload) {
  std::vector<Segment> segs;
  for (size_t i = 0; i < 5; ++i) segs.push_back({i * 10, 10});
  Recorder three;
  run_pipeline(three, segs, 3);
  EXPECT_EQ(three.log,
            "D0:0 D1:1 D2:2 W0 R0:0 U0:0 D0:3 W1 R1:1 U1:1 D1:4 W2 R2:2 U2:2 W0 R0:3 U0:3 W1 R1:4 "
            "U1:4 F");
  Recorder one;
  run_pipeline(one, {segs.begin(), segs.begin() + 2}, 1);
  EXPECT_EQ(one.log, "D0:0 W0 R0:0 U0:0 D0:1 W0 R0:1 U0:1 F");
  Recorder none;
  run_pipeline(none, {}, 2);
  EXPECT_EQ(none.log, "");
  EXPECT_THROW(run_pipeline(none, segs, 0), Error);
  EXPECT_THROW(run_pipeline(none, segs, kMaxSlots + 1), Error);
}

// A CUDA stream's stand-in: queued work runs in order on a thread of its own.
class FakeStream {
 public:
  FakeStream() : thread_([this] { loop(); }) {}
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  uint64_t push(std::function<void()> fn) {
    std::lock_guard<std::mutex> l(m_);
    q_.push_back(std::move(fn));
    cv_.notify_all();
    return ++queued_;
  }
  // Until work number k has run (0: at once); false after 10 s.
  bool wait_for(uint64_t k) {
    std::unique_lock<std::mutex> l(m_);
    return cv_.wait_for(l, std::chrono::seconds(10), [&] { return done_ >= k; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      std::function<void()> fn = std::move(q_.front());
      q_.pop_front();
      l.unlock();
      fn();
      l.lock();
      ++done_;
      cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  uint64_t queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is made
};

// PipelineOps over host memory: the "device" tensor is a vector, copies are memcpy on the two
// fake streams, the host collective the real one (host_reduce_segment over c's transport).
class FakeOps final : public PipelineOps {
 public:
  FakeOps(const CollContext& c, std::vector<float>& dev, int slots, size_t slot_bytes)
      : c_(c),
        dev_(reinterpret_cast<char*>(dev.data())),
        slot_(slots, std::vector<char>(slot_bytes)),
        state_(slots, State::Free),
        down_at_(slots, 0),
        up_at_(slots, 0) {}
  void download(const Segment& seg, int s) override {
    step(s, State::Free, State::Down, "download");
    const uint64_t after = up_at_[s];  // the slot's last upload, as cudaStreamWaitEvent
    down_at_[s] = down_.push([this, seg, s, after] {
      if (!up_.wait_for(after)) {
        stuck_ = true;  // the test fails on it; the copy is skipped
        return;
      }
      std::memcpy(slot_[s].data(), dev_ + seg.offset, seg.bytes);
    });
  }
  void wait(int s) override {
    step(s, State::Down, State::Ready, "wait");
    ASSERT_TRUE(down_.wait_for(down_at_[s])) << "slot " << s << "'s download";
  }
  void host_reduce(const Segment& seg, int s) override {
    step(s, State::Ready, State::Reduced, "host_reduce");
    host_reduce_segment(c_, seg, slot_[s].data());
  }
  void upload(int s, const Segment& seg) override {
    step(s, State::Reduced, State::Free, "upload");
    last_up_ = up_at_[s] =
        up_.push([this, seg, s] { std::memcpy(dev_ + seg.offset, slot_[s].data(), seg.bytes); });
  }
  void finish() override {
    ASSERT_TRUE(up_.wait_for(last_up_)) << "the uploads";
    ASSERT_FALSE(stuck_) << "a download waited 10 s for its slot's upload";
  }
  std::string misuse;  // the first call out of order

 private:
  enum class State { Free, Down, Ready, Reduced };
  void step(int s, State from, State to, const char* what) {
    if (state_[s] != from && misuse.empty())
      misuse = std::string(what) + " on slot " + std::to_string(s) + " out of order";
    state_[s] = to;
  }
  const CollContext& c_;
  char* dev_;
  std::vector<std::vector<char>> slot_;
  std::vector<State> state_;
  std::vector<uint64_t> down_at_, up_at_;
  uint64_t last_up_ = 0;
  std::atomic<bool> stuck_{false};
  FakeStream down_, up_;  // last: their threads end before the rest goes
};

// W ranks as threads, each its own fake device: every rank ends with the sum, for every slot
// count, sizes that are not a multiple of the segment, one segment and many.
TEST(StagedPipeline, RanksAsThreadsSumRight) {
  for (int W : {2, 3}) {
    auto tps = make_mem_transports(W);
    expect_no_errors(run_threads(W, [&](int r) {
      uint64_t seq = 0;
      for (int slots = 1; slots <= kMaxSlots; ++slots)
        for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(4099)}) {
          std::vector<float> dev(n);
          for (size_t i = 0; i < n; ++i) dev[i] = fval(r, i);
          Fingerprint fp;
          fp.seq = ++seq;
          fp.op = CollOp::AllReduce;
          fp.count = n;
          const CollContext c{*tps[r], fp, Millis(20000)};
          const std::vector<Segment> segs = cut(n * 4, 4, 64, 11);
          {
            FakeOps ops(c, dev, slots, segs.front().bytes);
            run_pipeline(ops, segs, slots);
            ASSERT_EQ(ops.misuse, "") << "W=" << W << " slots " << slots << " n " << n;
          }
          for (size_t i = 0; i < n; ++i) {
            float want = 0;
            for (int q = 0; q < W; ++q) want += fval(q, i);
            ASSERT_EQ(dev[i], want) << "W=" << W << " rank " << r << " slots " << slots << " n "
                                    << n << " element " << i;
          }
        }
    }));
  }
}

// On a GPU: allreduce_bench's staged ring with 2..4 slots, sizes of one segment and of 16 (8 MiB),
// checked clean for 2 and 3 ranks (skipped without a CUDA device).
TEST(StagedPipeline, CudaAllreduceBenchChecksClean) {
  const std::string bench = std::string(ENGINE_BUILD_DIR) + "/apps/allreduce_bench";
  if (access(bench.c_str(), X_OK) != 0) GTEST_SKIP() << bench << " is not built";
  if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  engine::testing::TempDir dir;
  for (int world : {2, 3})
    for (int slots : {2, 3, 4}) {
      const std::string json = dir.file("rows.json");
      const engine::testing::RunResult r = engine::testing::run(
          bench + " --device cuda --backend ring --ring-transport staged --world-size " +
          std::to_string(world) + " --staged-pipeline " + std::to_string(slots) +
          " --min-bytes 4 --max-bytes 8M --step-factor 8 --iters 3 --warmup 1 --timeout 60 " +
          "--json " + json);
      ASSERT_EQ(r.code, 0) << r.output;
      std::ifstream f(json);
      int rows = 0;
      for (std::string line; std::getline(f, line); ++rows)
        EXPECT_EQ(parse_json(line, json).value("wrong", Json()), 0) << line;
      EXPECT_EQ(rows, 8) << r.output;  // 4 B, 32 B, ..., 1 MiB (4 segments), 8 MiB (16)
    }
}

}  // namespace
}  // namespace engine::comm::staged
