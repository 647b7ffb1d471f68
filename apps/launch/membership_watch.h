// apps/launch/membership_watch.h: launch --on-rank-loss continue watches the job's generations
// (comm/rendezvous/membership.h) on a thread of its own, so that a store that stops answering (a
// cut link) never holds up the ranks' output or their reaping.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/rendezvous/tcp_store.h"

namespace engine::launch {

class MembershipWatch {
 public:
  // Polls the store at host:port every 50 ms for the next generation's members (connecting again
  // after a failure); wake() is called (on the watch's thread) when one is published or the
  // store fails.
  MembershipWatch(std::string host, int port, std::function<void()> wake);
  ~MembershipWatch();
  MembershipWatch(const MembershipWatch&) = delete;
  MembershipWatch& operator=(const MembershipWatch&) = delete;

  struct Generation {
    int64_t number = 0;
    std::vector<int> ids;
  };
  // The generations published since the last call, in order.
  std::vector<Generation> take();
  // The first failure after the store had answered ("" while none).
  std::string failure() const;

 private:
  void loop(std::string host, int port);

  std::function<void()> wake_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<Generation> found_;
  std::string failure_;
  std::thread thread_;
};

}  // namespace engine::launch
