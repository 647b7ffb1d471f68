// comm/backends/cuda_ipc/ipc_peers.h: whether the CUDA IPC ring can run, asking P2P only of what
// the ring needs: each rank maps the memory of its two ring neighbours (rank - 1 and rank + 1 mod
// W), so only their GPUs must be reachable from its own. Asking it of every visible GPU, as before,
// fell back to the staged path on PCIe machines with partial P2P although the ring's pairs had it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/base/reduce.h"
#include "io/dtype.h"

namespace engine::comm {

// A ring neighbour whose GPU this process sees under index `device` and is not this rank's own:
// the pairs that need cudaDeviceCanAccessPeer(own, device).
struct RingPeer {
  int rank = -1;
  int device = -1;
};

// rank_gpus[r]: rank r's GPU UUID; visible[d]: the UUID of this process's cuda:d. A neighbour on
// this rank's own GPU needs no P2P; one whose GPU this process does not see (CUDA_VISIBLE_DEVICES
// per rank) is left to cudaIpcOpenMemHandle, which decides. Pure: tested on the CPU.
std::vector<RingPeer> ring_peers_to_check(int rank, int world, int own_device,
                                          const std::vector<std::string>& rank_gpus,
                                          const std::vector<std::string>& visible);

// How the ranks agree on whether the ring can run: their host collectives. The Communicator's
// raw-buffer ones, which sit above the backends: the template below hands them in.
struct HostAgreement {
  int rank = 0, world = 1;
  // out (world * bytes) gets every rank's `bytes` bytes of `in`, in rank order.
  std::function<void(const void* in, void* out, size_t bytes)> all_gather;
  // The least of every rank's value.
  std::function<int64_t(int64_t)> min;
};

// Collective (every rank calls it, each with its GPU): "" when every rank can join the CUDA IPC
// ring on `device`; else this rank's reason (CudaIpcRing::unsupported_reason, no P2P to a
// neighbour's GPU, or "another rank cannot use CUDA IPC").
std::string ipc_ring_problem(const HostAgreement& ranks, int device);

// The same among the ranks of `group`: anything with the Communicator's rank(), size() and
// raw-buffer all_gather and all_reduce (comm/communicator.h).
template <class Group>
std::string ipc_ring_problem(Group& group, int device) {
  HostAgreement a;
  a.rank = group.rank();
  a.world = group.size();
  a.all_gather = [&group](const void* in, void* out, size_t bytes) {
    group.all_gather(in, out, bytes, DType::U8);
  };
  a.min = [&group](int64_t v) {
    group.all_reduce(&v, 1, DType::I64, ReduceOp::Min);
    return v;
  };
  const HostAgreement& agreement = a;  // the function above, not this template again
  return ipc_ring_problem(agreement, device);
}

}  // namespace engine::comm
