// apps/launch/rank_env.cpp: see rank_env.h.
#include "apps/launch/rank_env.h"

#include <algorithm>
#include <utility>

namespace engine::launch {

std::vector<std::string> rank_environment(const JobShape& job, int local_rank, int cores,
                                          const std::vector<std::string>& base) {
  const int rank = job.node_rank * job.nproc_per_node + local_rank;
  const int world = job.nnodes * job.nproc_per_node;
  std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(job.nproc_per_node)},
      {"GROUP_RANK", std::to_string(job.node_rank)},
      {"NODE_RANK", std::to_string(job.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(job.nnodes)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
  };
  auto key_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  bool threads_set = false;
  std::vector<std::string> env;
  for (const std::string& entry : base) {
    const std::string key = key_of(entry);
    if (key == "ENGINE_THREADS") threads_set = true;
    const bool replaced =
        std::any_of(ours.begin(), ours.end(), [&](const auto& kv) { return kv.first == key; });
    if (!replaced) env.push_back(entry);
  }
  if (!threads_set)
    ours.emplace_back("ENGINE_THREADS", std::to_string(std::max(1, cores / job.nproc_per_node)));
  for (const auto& [key, value] : ours) env.push_back(key + "=" + value);
  return env;
}

}  // namespace engine::launch
