// apps/threads.h: how many kernel threads one rank takes when --threads is not given. Ranks that
// share a host must share its cores, or they fight for them.
#pragma once
#include <functional>
#include <string>

namespace engine::apps {

// Reads an environment variable: nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// ENGINE_THREADS (an engine::Error naming it unless an integer 1 .. 1024), else OMP_NUM_THREADS
// (torchrun sets 1 when it starts several ranks; the first number of a list), else usable_cores
// divided by the ranks on this host: LOCAL_WORLD_SIZE (torchrun, launch),
// OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI), or this node's entry of Slurm's SLURM_STEP_TASKS_PER_NODE
// / SLURM_TASKS_PER_NODE ("2(x3),1") at SLURM_NODEID; at least 1. Other values that are not
// positive integers are skipped.
int default_threads(const EnvLookup& env, int usable_cores);

// The cores this process may run on (its CPU affinity), at least 1.
int usable_cores();

}  // namespace engine::apps
