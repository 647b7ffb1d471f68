// core/cuda/graph.cu: cuda::Graph (core/cuda_graph.h): capture on the compute stream, one
// instantiation, replays; the allocator's private pool kept for the graph's life.
#include <cstdio>

#include "core/cuda/allocator.cuh"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_graph.h"
#include "core/error.h"

namespace engine::cuda {
namespace {

__global__ void write_u64_kernel(uint64_t* p, uint64_t v) {
  *p = v;
}

// One line for a failed capture: what was captured, the runtime's word for why.
[[noreturn]] void capture_failed(const std::string& what, cudaError_t err, const char* when) {
  (void)cudaGetLastError();
  ENGINE_FAIL("CUDA graph of ", what, ": ", when, ": ", cudaGetErrorString(err), " (",
              cudaGetErrorName(err),
              "): an operation of the step cannot be captured (a host wait, a pageable copy, "
              "a free); run it with ENGINE_CUDA_GRAPH=off");
}

}  // namespace

Graph::Graph(int device) : device_(device) {
  pool_ = create_graph_pool(device);
}

Graph::~Graph() {
  abort_capture();
  DeviceGuard guard(device_);
  if (exec_) {
    // Replays still queued must end before the pool's blocks can serve anything else.
    cudaError_t err = cudaStreamSynchronize(compute_stream(device_));
    if (err == cudaSuccess) err = cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    if (err != cudaSuccess)
      std::fprintf(stderr, "cuda::Graph: destroying the graph of %s on cuda:%d: %s\n",
                   what_.c_str(), device_, cudaGetErrorString(err));
  }
  try {
    release_graph_pool(device_, pool_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda::Graph: %s\n", e.what());
  }
}

void Graph::begin_capture(const std::string& what) {
  ENGINE_CHECK(!capturing_ && !exec_, "cuda::Graph of ", what, ": captured once only");
  what_ = what;
  DeviceGuard guard(device_);
  // Thread-local: an unsafe call of this thread invalidates the capture; other threads (the
  // communicator's, the NCCL watchdog) go on.
  const cudaError_t err =
      cudaStreamBeginCapture(compute_stream(device_), cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) capture_failed(what_, err, "cudaStreamBeginCapture");
  begin_graph_pool_capture(device_, pool_);
  capturing_ = true;
}

void Graph::end_capture() {
  ENGINE_CHECK(capturing_, "cuda::Graph of ", what_, ": end_capture without begin_capture");
  DeviceGuard guard(device_);
  cudaGraph_t graph = nullptr;
  capturing_ = false;
  end_graph_pool_capture(device_);
  cudaError_t err = cudaStreamEndCapture(compute_stream(device_), &graph);
  if (err != cudaSuccess) {
    if (graph) (void)cudaGraphDestroy(graph);
    capture_failed(what_, err, "cudaStreamEndCapture");
  }
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  if (err != cudaSuccess) capture_failed(what_, err, "cudaGraphInstantiate");
  exec_ = exec;
}

void Graph::abort_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  try {
    end_graph_pool_capture(device_);
  } catch (...) {
  }
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(compute_stream(device_), &graph) == cudaSuccess && graph)
    (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
}

void Graph::replay() {
  ENGINE_CHECK(exec_, "cuda::Graph of ", what_, ": replay before end_capture");
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), compute_stream(device_)));
}

void write_u64(int device, uint64_t* p, uint64_t v) {
  DeviceGuard guard(device);
  write_u64_kernel<<<1, 1, 0, compute_stream(device)>>>(p, v);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace engine::cuda
