// comm/base/progress.h: how far a rank has got, as counters its health endpoint reports to peers
// (comm/health/health.h). The Communicator stores the sequence number of each collective it starts
// and finishes: two relaxed stores per collective, nothing per segment.
#pragma once
#include <atomic>
#include <cstdint>

namespace engine::comm {

struct Progress {
  std::atomic<uint64_t> started{0};    // the last collective called (#seq)
  std::atomic<uint64_t> completed{0};  // the last one that returned without error
};

}  // namespace engine::comm
