// apps/allreduce_bench/config.h: owns allreduce_bench's settings and their flags.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "apps/allreduce_bench/collective.h"
#include "comm/base/reduce.h"
#include "comm/rendezvous/rendezvous.h"

namespace engine::allreduce_bench {

struct Config {
  int world_size = 0;  // > 0: fork this many ranks on this host; 0: join through init_method
  std::string init_method = "env://";
  comm::TransportKind transport = comm::TransportKind::Auto;
  int64_t min_bytes = 8, max_bytes = int64_t(64) << 20;
  double step_factor = 2.0;
  int64_t iters = 0;  // 0: as torch_allreduce.py, max(5, min(200, 2e7 / bytes))
  int64_t warmup = 5;
  comm::ReduceOp op = comm::ReduceOp::Sum;
  DType dtype = DType::F32;
  // --algo: the algorithm of all_reduce, broadcast and reduce (comm/algorithms/tuning.h); `all`
  // runs each that applies, rows side by side.
  std::vector<comm::Algo> algos = {comm::Algo::Auto};
  std::vector<CollOp> collectives = {CollOp::AllReduce};
  bool check = true;
  std::string json_path;      // "" = none, "-" = stdout
  int64_t segment_bytes = 0;  // 0: the communicator's default
  int64_t timeout_s = 120;
  // Where the buffers live: "cpu" (host memory) or "cuda" (rank r on cuda:(local rank % devices)).
  std::string device = "cpu";
  // What moves them: "ring" (our Communicator; CUDA tensors through its Tensor overloads) or
  // "nccl" (comm::NcclGroup; --device cuda only) or "mpi" (every collective through MPI:
  // comm/backends/mpi/mpi_backend.h; ranks started by mpirun).
  std::string backend = "ring";
  // --device cuda --backend ring: "staged" (through pinned host memory and the ring above) or
  // "ipc" (all_reduce on the CUDA IPC ring, comm/backends/cuda_ipc/cuda_ipc_ring.h, attached to the
  // Communicator).
  std::string ring_transport = "staged";
  // --ring-transport ipc: the CUDA IPC ring's protocol (docs/ring.md): "auto" (the default),
  // "ll", "simple", "events".
  std::string cuda_ring_protocol = "auto";
  // --cuda-ring-channels: Simple's channels; --cuda-ring-slot-bytes: Simple's slot size. 0:
  // comm::IpcRingOptions' defaults.
  int64_t cuda_ring_channels = 0;
  int64_t cuda_ring_slot_bytes = 0;
  // --two-level: host buffers' all_reduce in two levels across hosts (comm::TwoLevel).
  comm::TwoLevel two_level = comm::TwoLevel::Auto;

  bool cuda() const { return device == "cuda"; }
  bool nccl() const { return backend == "nccl"; }
  bool mpi() const { return backend == "mpi"; }
  // Our host algorithms move the data (where --algo applies).
  bool ours() const { return backend == "ring" && !(cuda() && ring_transport == "ipc"); }
  bool every_algo() const { return algos.size() > 1; }
  // The algorithms to time for collective c: --algo's, or with `all` each that c has.
  std::vector<comm::Algo> algos_for(CollOp c) const;

  int64_t iters_for(int64_t nbytes) const;
  std::vector<int64_t> sizes() const;  // min_bytes, * step_factor, ..., <= max_bytes
};

// Parses argv into *cfg; returns false when --help was printed. Throws apps::UsageError on a bad
// flag, value or combination of flags.
bool parse_flags(int argc, char** argv, Config* cfg);

// "8", "4K", "64M", "1G" (powers of 1024) -> bytes.
int64_t parse_bytes(const std::string& flag, const std::string& value);

}  // namespace engine::allreduce_bench
