// comm/backends/cuda_ipc/protocol/describe.h: the one-line error of a failed protocol call, made
// by the host from the error record (protocol/layout.h) that the call's waits wrote: the rank at
// fault first, then what this rank waited for. Host code; the GPU ring and the CPU tests use it.
#pragma once
#include <chrono>
#include <string>

#include "comm/backends/cuda_ipc/protocol/layout.h"

namespace engine::comm::ipc::proto {

// What this rank's call was (for the message) and who it is.
struct CallLabel {
  int rank = 0, world = 1, device = -1;  // device -1: threads as ranks (no "cuda:N")
  uint64_t count = 0;
  const char* op = "SUM";
  const char* protocol = "simple";
  std::chrono::milliseconds timeout{0};
};

// "ipc_ring all_reduce #7 of 100 floats (SUM, ll) on rank 0 of 2: rank 1 ...; the ring is broken"
std::string describe_error(const ErrorRecord& e, const CallLabel& call);

}  // namespace engine::comm::ipc::proto
