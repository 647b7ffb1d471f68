// comm/health/call_watchdog.cpp: see call_watchdog.h.
#include "comm/health/call_watchdog.h"

namespace engine::comm {

CallWatchdog::CallWatchdog(Expiry on_expiry) : on_expiry_(std::move(on_expiry)) {
  thread_ = std::thread([this] { loop(); });
}

CallWatchdog::~CallWatchdog() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void CallWatchdog::arm(const WatchedCall& call) {
  const Clock::time_point deadline = Clock::now() + call.timeout;
  std::lock_guard lk(mu_);
  call_ = call;
  deadline_ = deadline;
  armed_ = true;
  if (deadline < sleeping_until_) cv_.notify_one();
}

void CallWatchdog::disarm() {
  std::lock_guard lk(mu_);
  armed_ = false;
}

void CallWatchdog::loop() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (armed_ && Clock::now() >= deadline_) {
      const WatchedCall expired = call_;
      armed_ = false;
      sleeping_until_ = Clock::time_point::max();
      lk.unlock();
      on_expiry_(expired);
      lk.lock();
      continue;
    }
    sleeping_until_ = armed_ ? deadline_ : Clock::time_point::max();
    if (armed_)
      cv_.wait_until(lk, sleeping_until_);
    else
      cv_.wait(lk);
  }
}

}  // namespace engine::comm
