// comm/health/watchdog.h: the thread that watches queued device work (NCCL's queued all_reduces)
// until it finishes, fails or outlives its deadline. Plain C++: the work is seen through a Probe (a
// CUDA event in comm/backends/nccl/nccl_group.cpp, a fake one in the tests), so the loop runs on
// the CPU.
//
// The loop: with nothing queued it waits for work; while the front item runs it sleeps
// `poll_period` between two looks (a look: the item's probe, then the owner's async-error check),
// so a collective that runs for the whole of backward costs a wake-up per period, not a core. An
// item that finishes is dropped and the next one looked at at once. A failed probe, an async
// error or a passed deadline records the error (error()), drops every queued item, and calls
// `abort` once; the watchdog then idles until destroyed.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/base/deadline.h"

namespace engine::comm {

class Watchdog {
 public:
  // One watched item: poll() never blocks.
  class Probe {
   public:
    enum class State { Running, Done, Failed };
    virtual ~Probe() = default;
    // Done, Running, or Failed with *why set ("failed: <reason>").
    virtual State poll(std::string* why) = 0;
  };

  struct Hooks {
    // Runs first on the watchdog's thread (make the rank's device current there).
    std::function<void()> on_start;
    // While the front item runs: "" or why the communicator failed ("failed: ...").
    std::function<std::string()> async_error;
    // The error message for item `what` that stopped for `why`.
    std::function<std::string(const std::string& what, const std::string& why)> describe;
    // Called once, on the watchdog's thread, after the error is recorded.
    std::function<void()> abort;
  };

  Watchdog(Hooks hooks, Millis poll_period);
  // Stops the thread (an item still queued is dropped, its probe destroyed).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Queues an item after the ones already queued; starts the thread on first use.
  void watch(std::unique_ptr<Probe> probe, Deadline deadline, std::string what);
  // "" until an item failed; then its message. timed_out(): it passed its deadline.
  std::string error() const;
  bool timed_out() const;
  // Items queued and not yet finished.
  size_t pending() const;

 private:
  struct Item {
    std::unique_ptr<Probe> probe;
    Deadline deadline;
    std::string what;
  };
  void loop();
  // Looks at the front item once, lock held (released around async_error): true when it is
  // still running, false when it finished (dropped) or failed (error recorded).
  bool look(std::unique_lock<std::mutex>& lk);
  void fail(std::unique_lock<std::mutex>& lk, const std::string& what, const std::string& why,
            bool timed_out);

  Hooks hooks_;
  Millis period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  std::string error_;
  bool timed_out_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace engine::comm
