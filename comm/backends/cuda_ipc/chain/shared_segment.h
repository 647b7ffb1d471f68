// comm/backends/cuda_ipc/chain/shared_segment.h: the event-chained ring's host counters
// (run.h's Shared) in a POSIX shm segment between the ranks' processes: rank 0 creates it under a
// fresh name and publishes the name, the others open it, and rank 0 unlinks the name once every
// rank has mapped it (as comm/transport/shm_transport.cpp does). Plain C++, no CUDA.
#pragma once
#include <string>

#include "comm/backends/cuda_ipc/chain/run.h"
#include "comm/base/store.h"

namespace engine::comm::ipc::chain {

class SharedSegment {
 public:
  // Collective over the `world` ranks: rank 0 creates, the others open what it published under
  // "<key>/shm"; each bounded by `timeout`, naming the rank that did not come.
  SharedSegment(Store& store, const std::string& key, int rank, int world, Millis timeout);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  Shared& shared() { return *shared_; }

 private:
  void create(const std::string& name, int world);
  void open(const std::string& name, int rank, int world);
  Shared* shared_ = nullptr;
};

}  // namespace engine::comm::ipc::chain
