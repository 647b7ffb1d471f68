// core/thread_pool.cpp: a fixed pool of workers woken per parallel region.
#include "core/thread_pool.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace engine {
namespace {

class Pool {
 public:
  ~Pool() { resize(1); }

  int size() const { return size_; }

  void resize(int n) {
    n = std::max(1, n);
    std::unique_lock lk(mu_);
    if (n == size_) return;
    stop_ = true;
    ++generation_;
    cv_.notify_all();
    lk.unlock();
    for (auto& t : workers_) t.join();
    workers_.clear();
    lk.lock();
    stop_ = false;
    size_ = n;
    // A worker starts from the current generation, so work posted before it runs is not missed.
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, g = generation_] { loop(i, g); });
  }

  // Runs fn(t, nt) for t = 0..nt-1; the caller runs t = 0.
  void run(const std::function<void(int, int)>& fn) {
    if (size_ == 1 || in_region_) {
      fn(0, 1);
      return;
    }
    std::unique_lock region(region_mu_);  // one region at a time
    {
      std::lock_guard lk(mu_);
      fn_ = &fn;
      pending_ = size_ - 1;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    in_region_ = true;
    try {
      fn(0, size_);
    } catch (...) {
      std::lock_guard lk(mu_);
      if (!error_) error_ = std::current_exception();
    }
    in_region_ = false;
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void loop(int t, uint64_t seen) {
    for (;;) {
      const std::function<void(int, int)>* fn;
      int nt;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        fn = fn_;
        nt = size_;
      }
      in_region_ = true;
      try {
        (*fn)(t, nt);
      } catch (...) {
        std::lock_guard lk(mu_);
        if (!error_) error_ = std::current_exception();
      }
      in_region_ = false;
      std::lock_guard lk(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::mutex mu_, region_mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* fn_ = nullptr;
  std::exception_ptr error_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  int size_ = 1;
  bool stop_ = false;
  static thread_local bool in_region_;
};
thread_local bool Pool::in_region_ = false;

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int hardware_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

void set_num_threads(int n) {
  pool().resize(n);
  openblas_set_num_threads(1);  // see thread_pool.h
}

int num_threads() {
  return pool().size();
}

void parallel_run(const std::function<void(int, int)>& fn) {
  pool().run(fn);
}

void parallel_for(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int nt = num_threads();
  if (nt == 1 || n < 2 * std::max<int64_t>(1, min_grain)) {
    fn(0, n);
    return;
  }
  pool().run([&](int t, int nthreads) {
    int64_t b = n * t / nthreads, e = n * (t + 1) / nthreads;
    if (b < e) fn(b, e);
  });
}

}  // namespace engine
