// core/threads.cpp: see threads.h.
#include "core/threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>

#include "core/knobs.h"
#include "core/thread_pool.h"

namespace engine {
namespace {

// The leading positive integer of s ("4" or "4,2"), or 0.
int leading_positive(const char* s) {
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || (*end != 0 && *end != ',') || v <= 0 || v > kMaxThreads) return 0;
  return static_cast<int>(v);
}

int local_ranks(const EnvLookup& env, const std::function<int()>& scheduler_tasks) {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    if (int n = leading_positive(env(name))) return n;
  return std::max(1, scheduler_tasks ? scheduler_tasks() : 0);
}

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return hardware_threads();
}

int default_threads(const EnvLookup& env, int cores, const std::function<int()>& scheduler_tasks) {
  if (int n = knobs::threads()) return n;
  if (int n = leading_positive(env("OMP_NUM_THREADS"))) return n;
  return std::max(1, cores / local_ranks(env, scheduler_tasks));
}

}  // namespace engine
