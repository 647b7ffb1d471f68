// tests/comm/test_watchdog.cpp: the NCCL watchdog's loop (comm/health/watchdog.h) with fake events:
// it sleeps while the front item runs (the review found it spinning on cudaEventQuery for the
// whole of backward), drops finished items in order, and aborts once on a failure, an async error
// or a passed deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/health/watchdog.h"

namespace engine::comm {
namespace {

using Clock = std::chrono::steady_clock;
using State = Watchdog::Probe::State;

// What the test controls and sees of one fake event.
struct FakeEventState {
  std::atomic<State> state{State::Running};
  std::atomic<int> polls{0};
  std::atomic<bool> destroyed{false};
  std::mutex mu;
  std::vector<Clock::time_point> times;  // of each poll
};

class FakeProbe final : public Watchdog::Probe {
 public:
  explicit FakeProbe(std::shared_ptr<FakeEventState> s) : s_(std::move(s)) {}
  ~FakeProbe() override { s_->destroyed = true; }
  State poll(std::string* why) override {
    {
      std::lock_guard<std::mutex> lk(s_->mu);
      s_->times.push_back(Clock::now());
    }
    ++s_->polls;
    const State st = s_->state.load();
    if (st == State::Failed) *why = "failed: fake event error";
    return st;
  }

 private:
  std::shared_ptr<FakeEventState> s_;
};

// Waits (bounded) until pred holds.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto end = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

struct Harness {
  std::atomic<int> aborts{0};
  std::atomic<int> async_checks{0};
  std::atomic<bool> async_failed{false};
  std::atomic<bool> started{false};
  Watchdog::Hooks hooks() {
    Watchdog::Hooks h;
    h.on_start = [this] { started = true; };
    h.async_error = [this]() -> std::string {
      ++async_checks;
      return async_failed ? "failed: remote process exited" : "";
    };
    h.describe = [](const std::string& what, const std::string& why) {
      return "nccl " + what + " on rank 0 of 2 " + why + "; communicator aborted";
    };
    h.abort = [this] { ++aborts; };
    return h;
  }
};

TEST(Watchdog, SleepsBetweenLooksWhileTheFrontItemRuns) {
  Harness h;
  const Millis period(5);
  Watchdog w(h.hooks(), period);
  auto ev = std::make_shared<FakeEventState>();
  w.watch(std::make_unique<FakeProbe>(ev), Deadline::after(Millis(60000)), "all_reduce of 8");
  ASSERT_TRUE(eventually([&] { return ev->polls >= 6; }));
  EXPECT_TRUE(h.started);
  // Each look is at least one period after the previous one: no spinning.
  std::vector<Clock::time_point> t;
  {
    std::lock_guard<std::mutex> lk(ev->mu);
    t = ev->times;
  }
  for (size_t i = 1; i < t.size(); ++i)
    EXPECT_GE(t[i] - t[i - 1], period - std::chrono::microseconds(200)) << "look " << i;
  // The async error is checked once per look, not in a loop of its own.
  EXPECT_LE(h.async_checks.load(), ev->polls.load());
  ev->state = State::Done;
  ASSERT_TRUE(eventually([&] { return w.pending() == 0; }));
  EXPECT_TRUE(ev->destroyed);
  EXPECT_EQ(w.error(), "");
  EXPECT_EQ(h.aborts, 0);
}

TEST(Watchdog, IdleWithNothingQueuedAndFinishedItemsGoInOrder) {
  Harness h;
  Watchdog w(h.hooks(), Millis(1));
  EXPECT_FALSE(h.started) << "no thread before the first item";
  auto a = std::make_shared<FakeEventState>(), b = std::make_shared<FakeEventState>();
  b->state = State::Done;  // finished before a: still waits its turn
  w.watch(std::make_unique<FakeProbe>(a), Deadline::after(Millis(60000)), "a");
  w.watch(std::make_unique<FakeProbe>(b), Deadline::after(Millis(60000)), "b");
  ASSERT_TRUE(eventually([&] { return a->polls >= 2; }));
  EXPECT_EQ(b->polls, 0) << "only the front item is looked at";
  EXPECT_EQ(w.pending(), 2u);
  a->state = State::Done;
  ASSERT_TRUE(eventually([&] { return w.pending() == 0; }));
  EXPECT_TRUE(a->destroyed && b->destroyed);
  EXPECT_EQ(h.aborts, 0);
}

TEST(Watchdog, AFailedEventAbortsOnceAndDropsTheRest) {
  Harness h;
  Watchdog w(h.hooks(), Millis(1));
  auto a = std::make_shared<FakeEventState>(), b = std::make_shared<FakeEventState>();
  w.watch(std::make_unique<FakeProbe>(a), Deadline::after(Millis(60000)), "all_reduce of 5");
  w.watch(std::make_unique<FakeProbe>(b), Deadline::after(Millis(60000)), "all_reduce of 6");
  a->state = State::Failed;
  ASSERT_TRUE(eventually([&] { return h.aborts == 1; }));
  EXPECT_EQ(w.error(),
            "nccl all_reduce of 5 on rank 0 of 2 failed: fake event error; communicator aborted");
  EXPECT_FALSE(w.timed_out());
  EXPECT_EQ(w.pending(), 0u);
  EXPECT_TRUE(b->destroyed);
  auto c = std::make_shared<FakeEventState>();
  w.watch(std::make_unique<FakeProbe>(c), Deadline::after(Millis(60000)), "late");
  EXPECT_TRUE(c->destroyed) << "after an abort nothing is watched";
  EXPECT_EQ(h.aborts, 1);
}

TEST(Watchdog, AnAsyncErrorAborts) {
  Harness h;
  Watchdog w(h.hooks(), Millis(1));
  auto a = std::make_shared<FakeEventState>();
  w.watch(std::make_unique<FakeProbe>(a), Deadline::after(Millis(60000)), "all_reduce of 7");
  ASSERT_TRUE(eventually([&] { return a->polls >= 1; }));
  h.async_failed = true;
  ASSERT_TRUE(eventually([&] { return h.aborts == 1; }));
  EXPECT_NE(w.error().find("all_reduce of 7 on rank 0 of 2 failed: remote process exited"),
            std::string::npos)
      << w.error();
}

TEST(Watchdog, APassedDeadlineIsATimeoutNamingIt) {
  Harness h;
  Watchdog w(h.hooks(), Millis(1));
  auto a = std::make_shared<FakeEventState>();
  w.watch(std::make_unique<FakeProbe>(a), Deadline::after(Millis(20)), "all_reduce of 9");
  ASSERT_TRUE(eventually([&] { return h.aborts == 1; }));
  EXPECT_TRUE(w.timed_out());
  EXPECT_NE(w.error().find("did not complete within 0.02 s"), std::string::npos) << w.error();
}

TEST(Watchdog, StopsPromptlyWhileAnItemRuns) {
  Harness h;
  auto a = std::make_shared<FakeEventState>();
  const auto t0 = Clock::now();
  {
    Watchdog w(h.hooks(), Millis(1000));  // a long period: the destructor must not wait it out
    w.watch(std::make_unique<FakeProbe>(a), Deadline::after(Millis(60000)), "x");
    ASSERT_TRUE(eventually([&] { return a->polls >= 1; }));
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(900));
  EXPECT_TRUE(a->destroyed);
  EXPECT_EQ(h.aborts, 0);
}

}  // namespace
}  // namespace engine::comm
