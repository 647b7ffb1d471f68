// tests/common/standalone_lock.h: Debian's torchrun (torch 1.13) --standalone always serves its
// rendezvous on localhost:29400, whatever --rdzv_endpoint says: one such test at a time on this
// machine. Every test that runs torchrun --standalone holds this lock (an flock on a file in /tmp,
// so test processes started by ctest -j exclude each other too).
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>

namespace engine::testing {

class StandaloneLock {
 public:
  explicit StandaloneLock(double timeout_s = 300) {
    fd_ = ::open("/tmp/engine-torchrun-standalone-29400.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    const auto t0 = std::chrono::steady_clock::now();
    while (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(timeout_s)) {
        ADD_FAILURE() << "another torchrun --standalone test held the lock for " << timeout_s
                      << " s";
        break;
      }
      pollfd none{-1, 0, 0};
      ::poll(&none, 0, 50);  // the holder gives no signal: look again in 50 ms
    }
  }
  ~StandaloneLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  StandaloneLock(const StandaloneLock&) = delete;
  StandaloneLock& operator=(const StandaloneLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace engine::testing
