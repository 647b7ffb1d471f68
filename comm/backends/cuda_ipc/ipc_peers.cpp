// comm/backends/cuda_ipc/ipc_peers.cpp: see ipc_peers.h.
#include "comm/backends/cuda_ipc/ipc_peers.h"

#include <cstdint>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::comm {

std::vector<RingPeer> ring_peers_to_check(int rank, int world, int own_device,
                                          const std::vector<std::string>& rank_gpus,
                                          const std::vector<std::string>& visible) {
  ENGINE_CHECK(
      world >= 1 && rank >= 0 && rank < world && static_cast<int>(rank_gpus.size()) == world,
      "ring_peers_to_check: rank ", rank, " of ", world, " with ", rank_gpus.size(), " GPUs");
  std::vector<RingPeer> out;
  for (int peer : {(rank + world - 1) % world, (rank + 1) % world}) {
    if (peer == rank || (!out.empty() && out.front().rank == peer)) continue;  // W = 1, 2
    const std::string& gpu = rank_gpus[peer];
    if (gpu == rank_gpus[rank]) continue;  // the same GPU
    for (int d = 0; d < static_cast<int>(visible.size()); ++d)
      if (visible[d] == gpu && d != own_device) out.push_back({peer, d});
  }
  return out;
}

std::string ipc_ring_problem(const HostAgreement& ranks, int device) {
  const int world = ranks.world, rank = ranks.rank;
  std::string why = CudaIpcRing::unsupported_reason(device);
  constexpr size_t kUuid = 16;
  const std::string mine = why.empty() ? cuda::device_uuid(device) : std::string(kUuid, '\0');
  std::string all(kUuid * world, '\0');
  ranks.all_gather(mine.data(), all.data(), kUuid);
  if (why.empty()) {
    std::vector<std::string> rank_gpus, visible;
    for (int r = 0; r < world; ++r) rank_gpus.push_back(all.substr(r * kUuid, kUuid));
    for (int d = 0; d < cuda::device_count(); ++d) visible.push_back(cuda::device_uuid(d));
    for (const RingPeer& p : ring_peers_to_check(rank, world, device, rank_gpus, visible))
      if (!cuda::can_access_peer(device, p.device)) {
        why = detail::concat("cuda:", device, " cannot access cuda:", p.device, " (rank ", p.rank,
                             "'s GPU, a ring neighbour) as a peer (no P2P between them)");
        break;
      }
  }
  const int64_t ok = ranks.min(why.empty() ? 1 : 0);
  if (why.empty() && !ok) why = "another rank cannot use CUDA IPC";
  return why;
}

}  // namespace engine::comm
