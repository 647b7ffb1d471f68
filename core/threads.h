// core/threads.h: how many kernel threads one rank takes when its program names no count. Ranks
// that share a host must share its cores, or they fight for them.
#pragma once
#include <cstdint>
#include <functional>

namespace engine {

// The most threads any program starts for its kernels (its own count, or ENGINE_THREADS).
constexpr int64_t kMaxThreads = 1024;

// Reads an environment variable: nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// ENGINE_THREADS (core/knobs.h, read from the process's environment: an engine::Error naming it
// unless an integer 1 .. 1024), else from env: OMP_NUM_THREADS
// (torchrun sets 1 when it starts several ranks; the first number of a list), else usable_cores
// divided by the ranks on this host: LOCAL_WORLD_SIZE (torchrun, launch),
// OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI), else scheduler_tasks() when given (the caller's count of
// this node's tasks from the job scheduler, e.g. Slurm's: comm/rendezvous/slurm_env.h
// local_task_count; asked only when the variables before it are unset; 0 when it knows none); at
// least 1. Other values that are not positive integers are skipped.
int default_threads(const EnvLookup& env, int usable_cores,
                    const std::function<int()>& scheduler_tasks = {});

// The cores this process may run on (its CPU affinity), at least 1.
int usable_cores();

}  // namespace engine
