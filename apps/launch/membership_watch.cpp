// apps/launch/membership_watch.cpp: see membership_watch.h.
#include "apps/launch/membership_watch.h"

#include <chrono>

#include "comm/rendezvous/membership.h"

namespace engine::launch {

MembershipWatch::MembershipWatch(std::string host, int port, std::function<void()> wake)
    : wake_(std::move(wake)), thread_([this, host, port] { loop(host, port); }) {}

MembershipWatch::~MembershipWatch() {
  stop_ = true;
  thread_.join();
}

void MembershipWatch::loop(std::string host, int port) {
  int64_t g = 1;
  bool connected = false;
  while (!stop_) {
    try {
      // A short timeout: a request to a store across a cut link gives up within seconds.
      comm::TcpStore store(host, port, false, comm::Millis(1000));
      connected = true;
      while (!stop_) {
        std::optional<std::vector<int>> ids = comm::generation_members(store, g);
        if (!ids) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
        {
          std::lock_guard lk(mu_);
          found_.push_back({g++, std::move(*ids)});
        }
        wake_();
      }
    } catch (const std::exception& e) {
      if (connected) {  // before the first connection the store may not be up yet
        std::lock_guard lk(mu_);
        if (failure_.empty()) failure_ = e.what();
      }
      if (connected) wake_();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

std::vector<MembershipWatch::Generation> MembershipWatch::take() {
  std::lock_guard lk(mu_);
  std::vector<Generation> out;
  out.swap(found_);
  return out;
}

std::string MembershipWatch::failure() const {
  std::lock_guard lk(mu_);
  return failure_;
}

}  // namespace engine::launch
