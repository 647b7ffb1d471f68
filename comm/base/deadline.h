// comm/base/deadline.h: a point in time that every blocking wait in comm/ is bounded by.
#pragma once
#include <algorithm>
#include <chrono>
#include <climits>
#include <string>

namespace engine::comm {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

class Deadline {
 public:
  static Deadline after(Millis timeout) { return Deadline(Clock::now() + timeout, timeout); }

  bool expired() const { return Clock::now() >= at_; }
  Millis remaining() const {
    auto left = std::chrono::duration_cast<Millis>(at_ - Clock::now());
    return std::max(left, Millis(0));
  }
  // Milliseconds for poll(): rounded up so that a 0.4 ms remainder still waits, capped.
  int poll_ms(int cap = INT_MAX) const {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now()).count();
    if (left <= 0) return 0;
    return static_cast<int>(std::min<long long>((left + 999) / 1000, cap));
  }
  Clock::time_point at() const { return at_; }
  Millis timeout() const { return timeout_; }

 private:
  Deadline(Clock::time_point at, Millis timeout) : at_(at), timeout_(timeout) {}
  Clock::time_point at_;
  Millis timeout_;
};

// "2.5 s" for messages.
inline std::string seconds_str(Millis ms) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g s", ms.count() / 1000.0);
  return buf;
}

}  // namespace engine::comm
