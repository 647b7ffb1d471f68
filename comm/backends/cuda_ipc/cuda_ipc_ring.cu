// comm/backends/cuda_ipc/cuda_ipc_ring.cu: CudaIpcRing with CUDA (cuda_ipc_ring.h): the choice of
// what runs, made from the mode before anything is allocated, and the calls handed to it.
#include <cstdio>
#include <utility>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/backends/cuda_ipc/queued_ring.h"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::comm {

CudaIpcRing::CudaIpcRing(std::shared_ptr<Store> store, int rank, int world, int device,
                         IpcRingOptions opts)
    : DeviceGroup(rank, world, device), opts_(std::move(opts)), store_(std::move(store)) {
  ENGINE_CHECK(store_ != nullptr, "ipc_ring init: no store");
  ENGINE_CHECK(world_ >= 1 && rank_ >= 0 && rank_ < world_, "ipc_ring init: rank ", rank_,
               " of world ", world_);
  check_cuda_device(device_, detail::concat("ipc_ring init on rank ", rank_));
  ENGINE_CHECK(opts_.timeout.count() > 0, "ipc_ring init on rank ", rank_, ": timeout ",
               opts_.timeout.count(), " ms");
  ran_ = opts_.protocol;
  if (world_ == 1) return;  // all_reduce over one rank moves nothing
  cuda::DeviceGuard guard(device_);
  try {
    mode_ = connect_ipc_peers(*store_, rank_, world_, device_, opts_);
    // Every rank read the same headers, so every rank decides the same.
    ran_ = ipc::proto::ring_protocol(opts_.protocol, mode_ == "time-sliced");
    if (ran_ == IpcProtocol::Events)
      ring_ = make_event_chain(*store_, rank_, world_, device_, opts_);
    else
      ring_ = make_proto_ring(*store_, rank_, world_, device_, opts_);
  } catch (...) {
    broken_ = true;
    throw;
  }
}

CudaIpcRing::~CudaIpcRing() = default;

void CudaIpcRing::all_reduce(void* data, size_t count, DType dtype, ReduceOp op,
                             const cuda::Event* ready) {
  check_call(data, count, dtype, op);
  ENGINE_CHECK(ready == nullptr || ready->device() == device_, "ipc_ring all_reduce on rank ",
               rank_, ": the ready event is of cuda:", ready ? ready->device() : -1,
               ", this ring runs on cuda:", device_);
  ENGINE_CHECK(count < (size_t(1) << 40), "ipc_ring all_reduce on rank ", rank_, ": count ", count,
               " is too large");
  if (count == 0 || world_ == 1) return;  // nothing to move (AVG over one rank divides by 1)
  cuda::DeviceGuard guard(device_);
  broken_ = true;  // until the call is queued: a throw leaves the ring broken
  ring_->enqueue(static_cast<float*>(data), static_cast<int64_t>(count), op, ready);
  ring_->compute_waits_last();
  broken_ = false;
}

cuda::Event CudaIpcRing::all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready) {
  ENGINE_CHECK(t.defined() && t.device() == Device::cuda(device_), "ipc_ring all_reduce on rank ",
               rank_, ": the tensor is not on cuda:", device_);
  check_call(t.raw_data(), static_cast<size_t>(t.numel()), t.dtype(), op);
  cuda::DeviceGuard guard(device_);
  if (t.numel() > 0 && world_ > 1) {
    broken_ = true;
    ring_->enqueue(static_cast<float*>(t.raw_data()), t.numel(), op, &ready);
    broken_ = false;
  }
  return cuda::Event::record(device_, cuda::Stream::Comm);
}

void CudaIpcRing::check() const {
  if (ring_) ring_->check();
}

namespace {

// Logs a failed CUDA call of a path that must not throw.
void log_failure(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  std::fprintf(stderr, "engine: ipc_ring: %s failed: %s\n", what, cudaGetErrorString(e));
}

}  // namespace

std::string CudaIpcRing::unsupported_reason(int device) {
  const int n = cuda::device_count();
  if (n == 0) return cuda::unavailable_reason();
  if (std::string p = cuda_device_problem(device); !p.empty()) return p;
  auto failed = [](cudaError_t e, const char* what) {
    (void)cudaGetLastError();
    return detail::concat(what, " failed: ", cudaGetErrorString(e));
  };
  int uva = 0, map_host = 0;
  cudaError_t e = cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, device);
  if (e != cudaSuccess) return failed(e, "cudaDeviceGetAttribute");
  e = cudaDeviceGetAttribute(&map_host, cudaDevAttrCanMapHostMemory, device);
  if (e != cudaSuccess) return failed(e, "cudaDeviceGetAttribute");
  if (!uva) return detail::concat("cuda:", device, " has no unified addressing");
  if (!map_host) return detail::concat("cuda:", device, " cannot map host memory");
  // P2P is asked of the two ring neighbours' GPUs only (comm/backends/cuda_ipc/ipc_peers.h), not of
  // every GPU. Whether this platform exports device memory at all (not under WSL, for one).
  std::string why;
  try {
    cuda::DeviceGuard guard(device);
    void* p = nullptr;
    e = cudaMalloc(&p, 256);
    if (e != cudaSuccess) return failed(e, "cudaMalloc");
    cudaIpcMemHandle_t h;
    e = cudaIpcGetMemHandle(&h, p);
    if (e != cudaSuccess) why = failed(e, "cudaIpcGetMemHandle");
    log_failure(cudaFree(p), "cudaFree");
  } catch (const std::exception& ex) {
    why = ex.what();
  }
  return why;
}

}  // namespace engine::comm
