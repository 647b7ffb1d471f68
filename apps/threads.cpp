// apps/threads.cpp: see threads.h.
#include "apps/threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/thread_pool.h"

namespace engine::apps {
namespace {

// The leading positive integer of s ("4" or "4,2"), or 0.
int leading_positive(const char* s) {
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || (*end != 0 && *end != ',') || v <= 0 || v > 1 << 20) return 0;
  return static_cast<int>(v);
}

int local_ranks(const EnvLookup& env) {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    if (int n = leading_positive(env(name))) return n;
  const char* node = env("SLURM_NODEID");
  const int node_id = node && *node ? std::atoi(node) : 0;
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
    if (const char* v = env(name))
      if (int n = slurm_tasks_on_node(v, node_id)) return n;
  return 1;
}

}  // namespace

int slurm_tasks_on_node(const std::string& per_node, int node) {
  std::istringstream items(per_node);
  std::string item;
  int first = 0;  // index of the first node this item covers
  while (std::getline(items, item, ',')) {
    int tasks = 0, repeat = 1;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%d(x%d%c", &tasks, &repeat, &tail) == 3) {
      if (tail != ')') return 0;
    } else if (std::sscanf(item.c_str(), "%d%c", &tasks, &tail) != 1) {
      return 0;
    }
    if (tasks <= 0 || repeat <= 0) return 0;
    if (node >= first && node < first + repeat) return tasks;
    first += repeat;
  }
  return 0;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return hardware_threads();
}

int default_threads(const EnvLookup& env, int cores) {
  for (const char* name : {"ENGINE_THREADS", "OMP_NUM_THREADS"})
    if (int n = leading_positive(env(name))) return n;
  return std::max(1, cores / local_ranks(env));
}

}  // namespace engine::apps
