// comm/backends/cuda_ipc/host_probe.cuh: host-side pieces the IPC rings share (queued_base.cu,
// proto_ring.cu, chain/event_chain.cu): the MPS probe behind their mode, the header fields they
// read, and the watchdog's view of a queued call. CUDA translation units only.
#pragma once
#include <cuda_runtime.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>

#include "comm/health/watchdog.h"
#include "core/error.h"

namespace engine::comm::ipc {

// The first line of a file ("" when it cannot be read).
inline std::string read_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// A fixed-size header field as a string (up to its first NUL).
inline std::string str_of(const char* p, size_t n) {
  return std::string(p, strnlen(p, n));
}

// An MPS daemon serves this host: its control pipe exists in CUDA_MPS_PIPE_DIRECTORY (default
// /tmp/nvidia-mps). A cheap probe, documented in docs/ring.md; no CUDA call.
inline bool mps_daemon_running() {
  const char* env = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string dir = env && *env ? env : "/tmp/nvidia-mps";
  struct stat st;
  return stat((dir + "/control").c_str(), &st) == 0;
}

// A queued call as the watchdog sees it: its pooled event, handed back when the probe goes.
class PooledProbe final : public Watchdog::Probe {
 public:
  PooledProbe(cudaEvent_t ev, std::function<void(cudaEvent_t)> give_back)
      : ev_(ev), give_back_(std::move(give_back)) {}
  ~PooledProbe() override { give_back_(ev_); }
  State poll(std::string* why) override {
    const cudaError_t q = cudaEventQuery(ev_);
    if (q == cudaSuccess) return State::Done;
    if (q == cudaErrorNotReady) return State::Running;
    *why = detail::concat("failed: ", cudaGetErrorString(q));
    return State::Failed;
  }

 private:
  cudaEvent_t ev_;
  std::function<void(cudaEvent_t)> give_back_;
};

}  // namespace engine::comm::ipc
