// comm/health/watchdog.cpp: Watchdog (see watchdog.h).
#include "comm/health/watchdog.h"

#include "core/error.h"

namespace engine::comm {

Watchdog::Watchdog(Hooks hooks, Millis poll_period)
    : hooks_(std::move(hooks)), period_(std::max(poll_period, Millis(1))) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::watch(std::unique_ptr<Probe> probe, Deadline deadline, std::string what) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!error_.empty()) return;  // aborted: nothing runs any more
    items_.push_back({std::move(probe), deadline, std::move(what)});
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_all();
}

std::string Watchdog::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

bool Watchdog::timed_out() const {
  std::lock_guard<std::mutex> lk(mu_);
  return timed_out_;
}

size_t Watchdog::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return items_.size();
}

void Watchdog::loop() {
  if (hooks_.on_start) hooks_.on_start();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    // Idle: wait for work (watch() notifies). The bound only re-checks; nothing is polled here.
    cv_.wait_for(lk, std::chrono::seconds(1), [&] { return stop_ || !items_.empty(); });
    if (stop_) return;
    // Finished items go at once; a running front item is looked at once per period.
    while (!stop_ && !items_.empty())
      if (look(lk)) cv_.wait_for(lk, period_, [&] { return stop_; });
  }
}

bool Watchdog::look(std::unique_lock<std::mutex>& lk) {
  Item& front = items_.front();
  std::string why;
  const Probe::State st = front.probe->poll(&why);
  if (st == Probe::State::Done) {
    items_.pop_front();
    return false;
  }
  if (st == Probe::State::Failed) {
    fail(lk, front.what, why.empty() ? "failed" : why, false);
    return false;
  }
  if (front.deadline.expired()) {
    fail(lk, front.what,
         detail::concat("did not complete within ", seconds_str(front.deadline.timeout()),
                        " (a peer may be dead or calling another collective)"),
         true);
    return false;
  }
  if (!hooks_.async_error) return true;
  const std::string what = front.what;  // front may go while unlocked (the destructor)
  lk.unlock();
  why = hooks_.async_error();
  lk.lock();
  if (why.empty() || stop_) return true;
  fail(lk, what, why, false);
  return false;
}

void Watchdog::fail(std::unique_lock<std::mutex>& lk, const std::string& what,
                    const std::string& why, bool timed_out) {
  error_ = hooks_.describe ? hooks_.describe(what, why) : what + " " + why;
  timed_out_ = timed_out;
  items_.clear();
  lk.unlock();
  if (hooks_.abort) hooks_.abort();
  lk.lock();
}

}  // namespace engine::comm
