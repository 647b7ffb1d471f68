// tests/comm/test_ipc_event_chain.cpp: the event-chained CUDA IPC ring (protocol events:
// comm/backends/cuda_ipc/chain/) on the CPU. Threads are the ranks; each rank's "stream"
// is a thread that runs its queue in order: a wait blocks until the peer's event slot has
// completed the record it captured when enqueued (CUDA's semantics), a step runs plan.h's
// step_value over the rank's buffers, a record completes the slot. The host side is run.h's
// run_call, the code the CUDA ring runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/backends/cuda_ipc/chain/plan.h"
#include "comm/backends/cuda_ipc/chain/run.h"
#include "comm/backends/cuda_ipc/chain/shared_segment.h"
#include "comm/rendezvous/mem_store.h"
#include "kernels/reduce.h"

namespace engine::comm::ipc::chain {
namespace {

// A fake stream: one thread running queued operations in order.
class FakeStream {
 public:
  FakeStream() : th_([this] { loop(); }) {}
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    th_.join();
  }
  void push(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      q_.push_back(std::move(f));
      ++pushed_;
    }
    cv_.notify_all();
  }
  // Blocks until everything queued so far ran (the test's cudaStreamSynchronize).
  void sync() {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t want = pushed_;
    done_cv_.wait(lk, [&] { return ran_ >= want; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      auto f = std::move(q_.front());
      q_.pop_front();
      lk.unlock();
      f();
      lk.lock();
      ++ran_;
      done_cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::function<void()>> q_;
  uint64_t pushed_ = 0, ran_ = 0;
  bool stop_ = false;
  std::thread th_;
};

// One (record, wait) operation as the hosts enqueued them, in one global order.
struct LogEntry {
  bool record;
  int rank, peer, slot;  // record: rank == peer
  uint64_t step;         // record: the step; wait: the record it captured
  uint64_t expected;     // wait: the step the waiter needs (its k - 1)
  bool ran = false;      // wait: it completed on the waiter's stream (else: enqueued)
};

struct World;

struct FakeRank {
  int rank = 0;
  std::vector<float> buf, data;
  std::atomic<uint64_t> slot_recorded[kEventSlots] = {};  // latest record enqueued (step)
  std::atomic<uint64_t> slot_done[kEventSlots] = {};      // latest record completed (step)
  uint64_t step = 0;
  ReduceOp op = ReduceOp::Sum;
  World* world = nullptr;
  std::unique_ptr<FakeStream> stream = std::make_unique<FakeStream>();
  void stream_wait(int peer, int slot);
  void launch(const StepWork& w);
  void record(int slot);
  bool peer_done(int peer, int slot);
};

struct World {
  int W = 0;
  Shared shared{};
  std::vector<std::unique_ptr<FakeRank>> ranks;
  std::mutex log_mu;
  std::vector<LogEntry> log;
  std::atomic<int> stuck{0};  // waits that never completed
  int device_us = 0;          // each step's kernel takes this long (a slow device: hosts run ahead)
  World(int w, size_t cap) : W(w) {
    shared.magic = kSharedMagic;
    shared.world = w;
    for (int r = 0; r < w; ++r) {
      ranks.push_back(std::make_unique<FakeRank>());
      ranks[r]->rank = r;
      ranks[r]->buf.assign(cap, 0.f);
      ranks[r]->data.assign(cap, 0.f);
      ranks[r]->world = this;
    }
  }
  // Every stream first (they read each other's slots and buffers), then the ranks.
  ~World() {
    for (auto& r : ranks) r->stream.reset();
  }
};

void FakeRank::stream_wait(int peer, int slot) {
  FakeRank& p = *world->ranks[peer];
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lk(world->log_mu);
    target = p.slot_recorded[slot].load(std::memory_order_acquire);
    world->log.push_back({false, rank, peer, slot, target, step});
  }
  World* w = world;
  const LogEntry ran{false, rank, peer, slot, target, step, true};
  stream->push([&p, slot, target, w, ran] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (p.slot_done[slot].load(std::memory_order_acquire) < target) {
      if (std::chrono::steady_clock::now() > until) {
        ++w->stuck;
        return;
      }
      std::this_thread::yield();
    }
    std::lock_guard<std::mutex> lk(w->log_mu);
    w->log.push_back(ran);
  });
}

template <class Op>
void run_step(const StepWork& w, float* buf, float* data, const float* left, Op op, float div) {
  for (size_t i = w.range.begin; i < w.range.end; ++i) {
    const float v = step_value(w.kind, data[i], left[i], op, w.divide ? div : 0.f);
    buf[i] = v;
    if (w.to_data) data[i] = v;
  }
}

void FakeRank::launch(const StepWork& w) {
  const int W = world->W;
  float* b = buf.data();
  float* d = data.data();
  const float* l = world->ranks[(rank + W - 1) % W]->buf.data();
  const ReduceOp o = op;
  const int us = world->device_us;
  stream->push([w, b, d, l, o, W, us] {
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
    const float div = static_cast<float>(W);
    switch (o) {
      case ReduceOp::Max:
        return run_step(w, b, d, l, kernels::MaxOp{}, div);
      case ReduceOp::Min:
        return run_step(w, b, d, l, kernels::MinOp{}, div);
      case ReduceOp::Prod:
        return run_step(w, b, d, l, kernels::ProdOp{}, div);
      default:
        return run_step(w, b, d, l, kernels::SumOp{}, div);
    }
  });
}

void FakeRank::record(int slot) {
  const uint64_t k = ++step;
  {
    std::lock_guard<std::mutex> lk(world->log_mu);
    slot_recorded[slot].store(k, std::memory_order_release);
    world->log.push_back({true, rank, rank, slot, k, 0});
  }
  std::atomic<uint64_t>* done = &slot_done[slot];
  stream->push([done, k] { done->store(k, std::memory_order_release); });
}

bool FakeRank::peer_done(int peer, int slot) {
  const FakeRank& p = *world->ranks[peer];
  return p.slot_done[slot].load(std::memory_order_acquire) >=
         p.slot_recorded[slot].load(std::memory_order_acquire);
}

float input(int rank, int call, size_t i) {
  return static_cast<float>((rank * 7 + call * 3 + static_cast<int>(i % 13)) % 11) - 4.5f +
         0.25f * static_cast<float>(rank);
}

// The result every rank must hold: chunk c reduced from rank c along the ring, as plan.h says.
std::vector<float> reference(int W, int call, size_t count, ReduceOp op) {
  std::vector<float> out(count);
  const RingSchedule s = chain_schedule(0, W, count);
  auto f = [op](float x, float acc) {
    switch (op) {
      case ReduceOp::Max:
        return kernels::MaxOp{}(x, acc);
      case ReduceOp::Prod:
        return kernels::ProdOp{}(x, acc);
      default:
        return kernels::SumOp{}(x, acc);
    }
  };
  for (int c = 0; c < W; ++c) {
    const Range r = s.chunk(c);
    for (size_t i = r.begin; i < r.end; ++i) {
      float acc = input(c, call, i);
      for (int j = 1; j < W; ++j) acc = f(input((c + j) % W, call, i), acc);
      out[i] = op == ReduceOp::Avg ? acc / static_cast<float>(W) : acc;
    }
  }
  return out;
}

// Every rank runs the calls (count, op) in order; returns each rank's error ("" if none).
std::vector<std::string> run_world(World& w, const std::vector<size_t>& counts, ReduceOp op,
                                   Millis timeout, int stop_rank = -1, int stop_after = 0) {
  std::vector<std::string> errors(w.W);
  std::vector<std::thread> th;
  for (int r = 0; r < w.W; ++r) {
    th.emplace_back([&, r] {
      FakeRank& me = *w.ranks[r];
      me.op = op;
      ChainState st;
      try {
        for (int call = 0; call < static_cast<int>(counts.size()); ++call) {
          if (r == stop_rank && call == stop_after) return;
          const size_t n = counts[call];
          for (size_t i = 0; i < n; ++i) me.data[i] = input(r, call, i);
          CallSpec c{r, w.W, n, op, timeout};
          run_call(w.shared, me, c, st);
          me.stream->sync();
          const std::vector<float> want = reference(w.W, call, n, op);
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(me.data[i], want[i]) << "rank " << r << " call " << call << " i " << i;
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : th) t.join();
  return errors;
}

class IpcEventChain : public ::testing::TestWithParam<std::tuple<int, ReduceOp>> {};

TEST_P(IpcEventChain, EveryRankEndsWithTheReferenceBits) {
  const auto [W, op] = GetParam();
  const std::vector<size_t> counts = {1, 7, static_cast<size_t>(W) - 1, 13, 1030, 4099, 3};
  World w(W, 4099);
  const auto errors = run_world(w, counts, op, Millis(5000));
  for (int r = 0; r < W; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(w.stuck.load(), 0);
  for (int r = 0; r < W; ++r)
    EXPECT_EQ(w.ranks[r]->step, counts.size() * static_cast<size_t>(steps_per_call(W)));
}

INSTANTIATE_TEST_SUITE_P(WorldsAndOps, IpcEventChain,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(ReduceOp::Sum, ReduceOp::Avg,
                                                              ReduceOp::Max)));

// plan.h's claim: step i reads the chunk left wrote in its step i-1, never the one right writes
// in the same step; the final reduce writes the chunk the rank owns; every chunk ends in data.
TEST(IpcEventChainPlan, StepsReadWhatLeftWroteAndNeverRaceRight) {
  for (int W = 2; W <= 6; ++W) {
    for (int r = 0; r < W; ++r) {
      const RingSchedule s = chain_schedule(r, W, 1000);
      const RingSchedule sl = chain_schedule(s.left(), W, 1000);
      const RingSchedule sr = chain_schedule(s.right(), W, 1000);
      std::vector<int> to_data;
      for (int i = 0; i < steps_per_call(W); ++i) {
        const StepWork w = plan_step(s, i, true);
        if (w.to_data) to_data.push_back(w.chunk);
        if (i > 0) {
          EXPECT_EQ(w.chunk, plan_step(sl, i - 1, true).chunk) << W << " " << r << " " << i;
        }
        const StepWork right = plan_step(sr, i, true);
        if (right.kind != StepKind::CopyIn) {
          EXPECT_NE(w.chunk, right.chunk) << W << " " << r;
        }
        EXPECT_EQ(w.divide, i == W - 1);
      }
      EXPECT_EQ(plan_step(s, W - 1, false).chunk, s.owned_chunk());
      std::sort(to_data.begin(), to_data.end());
      for (int c = 0; c < W; ++c) EXPECT_EQ(to_data[c], c) << "W " << W << " rank " << r;
    }
  }
}

// The K-slot rule: every wait captured exactly the step it needs (k - 1), so no slot was recorded
// again before a waiter had enqueued its wait on it; and each neighbour waited on each step.
TEST(IpcEventChainPlan, NoSlotIsRecordedAgainBeforeItsWaitersEnqueued) {
  for (int W : {2, 3, 4}) {
    World w(W, 600);
    w.device_us = 300;
    const auto errors = run_world(w, {600, 5, 600, 1, 64, 600}, ReduceOp::Sum, Millis(5000));
    for (int r = 0; r < W; ++r) ASSERT_EQ(errors[r], "");
    size_t waits = 0;
    std::map<std::pair<int, uint64_t>, int> ran;  // (rank, step): waits on it that have run
    for (const LogEntry& e : w.log) {
      if (e.ran) {
        ++ran[{e.peer, e.step}];
        continue;
      }
      if (e.record) {  // (a'): the waits on this slot's previous record have all run
        if (e.step > kEventSlots) {
          EXPECT_EQ((ran[{e.rank, e.step - kEventSlots}]), W == 2 ? 1 : 2)
              << "W " << W << ": rank " << e.rank << " recorded step " << e.step;
        }
        continue;
      }
      ++waits;
      EXPECT_EQ(e.step, e.expected) << "W " << W << ": rank " << e.rank << " waiting on rank "
                                    << e.peer << " slot " << e.slot;
      EXPECT_EQ(e.slot, event_slot(e.expected));
    }
    const size_t steps = 6 * static_cast<size_t>(steps_per_call(W));
    EXPECT_EQ(waits, static_cast<size_t>(W) * (steps - 1) * (W == 2 ? 1 : 2));
  }
}

TEST(IpcEventChainPlan, ARankThatStopsRecordingIsNamedByBothNeighbours) {
  World w(3, 64);
  // Rank 2 makes one call (steps 1..5), then stops: its neighbours wait for step 6 and time out.
  const auto errors = run_world(w, {64, 64}, ReduceOp::Sum, Millis(200), 2, 1);
  EXPECT_EQ(errors[2], "");
  EXPECT_NE(errors[0].find("rank 2 (left) did not record step 6 within 200 ms"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 2 (right) did not record step 6 within 200 ms"), std::string::npos)
      << errors[1];
  EXPECT_NE(errors[0].find("on rank 0 of 3"), std::string::npos) << errors[0];
}

TEST(IpcEventChainPlan, ACallWithAnotherCountIsNamed) {
  World w(2, 64);
  std::vector<std::string> errors(2);
  std::vector<std::thread> th;
  for (int r = 0; r < 2; ++r)
    th.emplace_back([&, r] {
      ChainState st;
      CallSpec c{r, 2, r == 0 ? 12u : 10u, ReduceOp::Sum, Millis(2000)};
      try {
        run_call(w.shared, *w.ranks[r], c, st);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : th) t.join();
  EXPECT_NE(errors[0].find("rank 1 (left) called all_reduce #1 of 10 floats (SUM)"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 0 (left) called all_reduce #1 of 12 floats"), std::string::npos)
      << errors[1];
}

// The shared counters between processes: rank 0 creates the segment, the others open it by the
// name it publishes; every mapping sees the same words (threads here, separate mappings).
TEST(IpcEventChainSegment, EveryRankMapsTheSameCounters) {
  MemStore store;
  std::vector<std::unique_ptr<SharedSegment>> seg(3);
  std::vector<std::thread> th;
  for (int r = 0; r < 3; ++r)
    th.emplace_back(
        [&, r] { seg[r] = std::make_unique<SharedSegment>(store, "t/chain", r, 3, Millis(5000)); });
  for (auto& t : th) t.join();
  for (int r = 0; r < 3; ++r) ASSERT_NE(seg[r], nullptr);
  EXPECT_NE(&seg[0]->shared(), &seg[1]->shared());
  store_release(seg[1]->shared().ranks[1].recorded, 17);
  EXPECT_EQ(load_acquire(seg[2]->shared().ranks[1].recorded), 17u);
  EXPECT_EQ(load_acquire(seg[0]->shared().ranks[2].recorded), 0u);
}

TEST(IpcEventChainSegment, ARankThatNeverMapsIsNamed) {
  MemStore store;
  try {
    SharedSegment seg(store, "t/chain", 0, 2, Millis(100));
    FAIL() << "rank 1 never came";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 did not map the shared segment"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace engine::comm::ipc::chain
