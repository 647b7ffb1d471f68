// tests/common/thread_guard.h: ThreadCount sets the kernels' thread count for a scope and puts
// the old count back when the scope ends, however it ends (a failed ASSERT or an exception).
#pragma once
#include "core/thread_pool.h"

namespace engine::testing {

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;
  void set(int n) { set_num_threads(n); }  // change it inside the scope; the old one still returns

 private:
  int saved_;
};

}  // namespace engine::testing
