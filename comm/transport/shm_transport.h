// comm/transport/shm_transport.h: the shared-memory fabric of the ranks on one host. The lowest
// local rank creates one POSIX shared-memory segment (doorbells and rings for every ordered pair,
// laid out by FabricLayout), publishes its name in the store; the others map it; once all have it
// mapped the creator unlinks the name, so nothing is left in /dev/shm even if a rank dies later.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/store.h"
#include "comm/transport/shm_ring.h"

namespace engine::comm {

struct ShmFabric {
  std::shared_ptr<void> mapping;  // unmaps when the last holder lets go
  char* base = nullptr;
  FabricLayout layout{0, 0, 0};
  int index = 0;  // this rank's index among local_ranks
};

// local_ranks: the global ranks on this host that talk through shared memory, ascending.
ShmFabric open_shm_fabric(Store& store, const std::string& key_prefix,
                          const std::vector<int>& local_ranks, int rank, uint64_t nonce,
                          Deadline deadline);

}  // namespace engine::comm
