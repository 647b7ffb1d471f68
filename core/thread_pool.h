// core/thread_pool.h: the CPU kernels' thread pool. The caller sets its size (train's thread
// count). parallel_for splits [0, n) into one contiguous static range per thread, so the same
// inputs and the same thread count give the same bits: no result depends on timing.
#pragma once
#include <cstdint>
#include <functional>

namespace engine {

// OpenBLAS is kept single-threaded: kernels split GEMMs over this pool themselves.
void set_num_threads(int n);
int num_threads();
int hardware_threads();

// fn(begin, end) on disjoint ranges covering [0, n). Runs inline when n < 2*min_grain or one
// thread.
void parallel_for(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn);
// fn(t, nt) once on each of nt threads (nt = num_threads()), t = 0..nt-1.
void parallel_run(const std::function<void(int, int)>& fn);

}  // namespace engine
