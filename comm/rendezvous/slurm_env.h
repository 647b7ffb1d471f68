// comm/rendezvous/slurm_env.h: what a task started by `srun` reads from Slurm's environment to find
// rank 0's store with no MASTER_* set (env://; the ranks come from SLURM_PROCID / SLURM_NTASKS).
//
// Store address: MASTER_ADDR and MASTER_PORT win when set. Otherwise the host is the first host of
// the step's node list (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST), where Slurm's block
// distribution places task 0, and the port is derived from the job and step ids:
//   port = 12000 + (8 * SLURM_JOB_ID + SLURM_STEP_ID) % 20000,   i.e. 12000..31999,
// below Linux's ephemeral ports (32768..60999), the same on every task of a step, different for
// up to 8 concurrent steps of a job and for the next 2,500 jobs on a node.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace engine::comm::slurm {

// Reads an environment variable: nullptr when unset or empty. Tests pass their own.
using Getenv = std::function<const char*(const char*)>;
const char* getenv_nonempty(const char* name);

// Expands a node list in Slurm's compressed syntax, in order: "node[01-04,07]" -> node01 node02
// node03 node04 node07 (zero padding from the lower bound's width), "a[1-2],b3" -> a1 a2 b3,
// "n[1-2]-ib[3-4]" -> n1-ib3 n1-ib4 n2-ib3 n2-ib4 (several brackets: the first varies slowest).
// Hosts are separated by commas or spaces outside brackets. On an unparsable list throws
// engine::Error "<what>='<list>': <why>" (what: the variable it came from).
std::vector<std::string> expand_hostlist(const std::string& list, const std::string& what);
// The first host of a node list, without expanding the rest.
std::string first_host(const std::string& list, const std::string& what);

// The store port of a step (see above).
int derive_port(uint64_t job_id, uint64_t step_id);

// True inside a task of an `srun` step: SLURM_PROCID and SLURM_STEP_ID (or SLURM_STEPID) set. A
// batch script (sbatch) or an salloc shell sets SLURM_NTASKS without being a task of a step.
bool in_step(const Getenv& env = getenv_nonempty);

struct StoreAddress {
  std::string host;  // a name or an address
  int port = 0;
  std::string host_from;  // where host came from: "MASTER_ADDR" or the node list variable
};
// The store of this step: MASTER_ADDR / MASTER_PORT when set, else from the node list and the ids
// (see above). engine::Error naming the variable when one is missing or does not parse.
StoreAddress store_address(const Getenv& env = getenv_nonempty);
// store_address() with a host taken from the node list resolved to a numeric address
// (getaddrinfo); engine::Error naming the variable and the host when it does not resolve.
StoreAddress resolved_store_address(const Getenv& env = getenv_nonempty);

// The number of tasks of this step on this node: entry SLURM_NODEID of SLURM_STEP_TASKS_PER_NODE
// ("2(x3),1" = 2,2,2,1), else of SLURM_TASKS_PER_NODE; 0 when they are not set.
int local_task_count(const Getenv& env = getenv_nonempty);

}  // namespace engine::comm::slurm
