// comm/health/call_watchdog.h: a time limit for calls that have none of their own (MPI's
// collectives wait forever): arm() before the call, disarm() after it; a call still armed past its
// deadline is handed to the expiry function on the watchdog's thread (for MPI: print why, then
// MPI_Abort the job). One call is armed at a time. The fast path is an uncontended mutex: the
// thread is woken only when it has nothing to wait for or the new deadline comes before the one it
// waits for.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/base/deadline.h"
#include "comm/base/frame.h"

namespace engine::comm {

// The call being watched: a static label ("MPI_Allreduce"), its fingerprint and its time limit.
struct WatchedCall {
  const char* what = "";
  Fingerprint fp;
  Millis timeout{0};
};

class CallWatchdog {
 public:
  using Expiry = std::function<void(const WatchedCall&)>;
  explicit CallWatchdog(Expiry on_expiry);
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  void arm(const WatchedCall& call);
  void disarm();

 private:
  void loop();

  Expiry on_expiry_;
  std::mutex mu_;
  std::condition_variable cv_;
  WatchedCall call_;
  bool armed_ = false, stop_ = false;
  Clock::time_point deadline_, sleeping_until_ = Clock::time_point::max();
  std::thread thread_;
};

// Arms w for the lifetime of the scope (none when w is null).
class WatchScope {
 public:
  WatchScope(CallWatchdog* w, const WatchedCall& call) : w_(w) {
    if (w_) w_->arm(call);
  }
  ~WatchScope() {
    if (w_) w_->disarm();
  }
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;

 private:
  CallWatchdog* w_;
};

}  // namespace engine::comm
