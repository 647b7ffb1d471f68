// apps/threads.cpp: see threads.h.
#include "apps/threads.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "apps/flags.h"
#include "comm/rendezvous/slurm_env.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace engine::apps {
namespace {

// The leading positive integer of s ("4" or "4,2"), or 0.
int leading_positive(const char* s) {
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || (*end != 0 && *end != ',') || v <= 0 || v > kMaxThreads) return 0;
  return static_cast<int>(v);
}

// ENGINE_THREADS is ours: a value that is not an integer 1 .. kMaxThreads is an error.
int engine_threads(const char* e) {
  if (!e || !*e) return 0;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(e, &end, 10);
  ENGINE_CHECK(*end == 0 && errno != ERANGE && n >= 1 && n <= kMaxThreads, "ENGINE_THREADS='", e,
               "': expected an integer 1 .. ", kMaxThreads);
  return static_cast<int>(n);
}

int local_ranks(const EnvLookup& env) {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    if (int n = leading_positive(env(name))) return n;
  auto nonempty = [&](const char* name) -> const char* {
    const char* v = env(name);
    return v && *v ? v : nullptr;
  };
  return std::max(1, comm::slurm::local_task_count(nonempty));
}

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return hardware_threads();
}

int default_threads(const EnvLookup& env, int cores) {
  if (int n = engine_threads(env("ENGINE_THREADS"))) return n;
  if (int n = leading_positive(env("OMP_NUM_THREADS"))) return n;
  return std::max(1, cores / local_ranks(env));
}

}  // namespace engine::apps
