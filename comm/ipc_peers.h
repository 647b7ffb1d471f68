// comm/ipc_peers.h: whether the CUDA IPC ring can run, asking P2P only of what the ring needs:
// each rank maps the memory of its two ring neighbours (rank - 1 and rank + 1 mod W), so only
// their GPUs must be reachable from its own. Asking it of every visible GPU, as before, fell back
// to the staged path on PCIe machines with partial P2P although the ring's pairs had it.
#pragma once
#include <string>
#include <vector>

namespace engine::comm {

class Communicator;

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

// Collective (every rank calls it, each with its GPU): "" when every rank can join the CUDA IPC
// ring on `device`; else this rank's reason (CudaIpcRing::unsupported_reason, no P2P to a
// neighbour's GPU, or "another rank cannot use CUDA IPC").
std::string ipc_ring_problem(Communicator& comm, int device);

}  // namespace engine::comm
