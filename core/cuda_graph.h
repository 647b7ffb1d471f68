// core/cuda_graph.h: one CUDA graph captured on a device's compute stream and replayed.
//
//   cuda::Graph g(device);
//   g.begin_capture("the training step");  // kernels queued on compute from here are recorded,
//   <queue the work>                       // not run; allocations come from the graph's pool
//   g.end_capture();                       // instantiated once
//   g.replay(); g.replay(); ...            // the recorded work, at the addresses of the capture
//
// The graph owns a private pool of the caching allocator (core/block_pool.h): what the capture
// allocated or freed stays the graph's until the graph is destroyed. Anything that cannot be
// captured (a host wait such as loss.item(), a copy from pageable memory, cudaFree) invalidates the
// capture: end_capture (or the call itself) throws engine::Error naming `what`, and
// abort_capture() leaves the stream and the allocator as they were. Implemented in
// core/cuda/graph.cu; in a build without CUDA (core/cuda_absent.cpp) every call throws.
#pragma once
#include <cstdint>
#include <string>

namespace engine::cuda {

class Graph {
 public:
  explicit Graph(int device);
  ~Graph();  // never throws: a failure to destroy is logged
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void begin_capture(const std::string& what);
  void end_capture();
  // After a failure inside the capture: ends it, drops what was recorded. Never throws.
  void abort_capture() noexcept;
  // Queues the graph on the compute stream; returns at once.
  void replay();
  bool ready() const { return exec_ != nullptr; }
  int device() const { return device_; }

 private:
  int device_;
  uint64_t pool_ = 0;
  bool capturing_ = false;
  std::string what_;
  void* exec_ = nullptr;  // cudaGraphExec_t
};

// *p = v, queued on device's compute stream (a kernel: v travels in its launch, so the host may
// write the next value at once). For values a graph reads at replay (dropout's offset).
void write_u64(int device, uint64_t* p, uint64_t v);

}  // namespace engine::cuda
