// apps/launch/rank_env.h: the environment each rank starts with: torchrun's variables, so that
// `train --init-method env://` finds its place, plus ENGINE_THREADS so ranks share the cores.
#pragma once
#include <string>
#include <vector>

namespace engine::launch {

struct JobShape {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// `base` ("KEY=VALUE" entries, e.g. from environ) with RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT set for `local_rank`, and ENGINE_THREADS = max(1, cores / N)
// unless `base` already sets it.
std::vector<std::string> rank_environment(const JobShape& job, int local_rank, int cores,
                                          const std::vector<std::string>& base);

}  // namespace engine::launch
