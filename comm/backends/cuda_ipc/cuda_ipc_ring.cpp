// comm/backends/cuda_ipc/cuda_ipc_ring.cpp: the parts of CudaIpcRing that need no CUDA (argument
// checks, the Tensor overload) and, in a build without CUDA, a constructor that says so. With CUDA
// the rest is cuda_ipc_ring.cu.
#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"

#include "comm/backends/cuda_ipc/queued_ring.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::comm {

const char* ipc_protocol_name(IpcProtocol p) {
  switch (p) {
    case IpcProtocol::Auto:
      return "auto";
    case IpcProtocol::Ll:
      return "ll";
    case IpcProtocol::Simple:
      return "simple";
    case IpcProtocol::Events:
      return "events";
  }
  return "?";
}

bool parse_ipc_protocol(const std::string& s, IpcProtocol* out) {
  for (IpcProtocol p :
       {IpcProtocol::Auto, IpcProtocol::Ll, IpcProtocol::Simple, IpcProtocol::Events}) {
    if (s == ipc_protocol_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

void CudaIpcRing::check_call(const void* data, size_t count, DType dtype, ReduceOp op) const {
  ENGINE_CHECK(!broken_, "ipc_ring all_reduce on rank ", rank_,
               ": the ring is broken by an earlier error");
  ENGINE_CHECK(dtype == DType::F32, "ipc_ring all_reduce on rank ", rank_, ": ", dtype_name(dtype),
               " is not supported (float32 only)");
  check_reduce_supported(dtype, op);
  ENGINE_CHECK(count == 0 || data != nullptr, "ipc_ring all_reduce on rank ", rank_,
               ": null buffer for ", count, " elements");
}

void CudaIpcRing::all_reduce(const Tensor& t, ReduceOp op, const cuda::Event* ready) {
  ENGINE_CHECK(t.defined(), "ipc_ring all_reduce on rank ", rank_, ": tensor is undefined");
  ENGINE_CHECK(t.device() == Device::cuda(device_), "ipc_ring all_reduce on rank ", rank_,
               ": tensor on ", t.device().str(), ", this rank's ring runs on cuda:", device_);
  all_reduce(t.raw_data(), static_cast<size_t>(t.numel()), t.dtype(), op, ready);
}

#ifndef ENGINE_WITH_CUDA  // no CUDA: the class exists so callers need no #ifdef; making one throws.

CudaIpcRing::CudaIpcRing(std::shared_ptr<Store>, int rank, int world, int device, IpcRingOptions)
    : DeviceGroup(rank, world, device) {
  ENGINE_FAIL("ipc_ring init on rank ", rank,
              ": CUDA is not built in (configure with -DENGINE_CUDA=ON on a machine with nvcc)");
}

CudaIpcRing::~CudaIpcRing() = default;

void CudaIpcRing::all_reduce(void*, size_t, DType, ReduceOp, const cuda::Event*) {
  ENGINE_FAIL("ipc_ring all_reduce: CUDA is not built in");
}

cuda::Event CudaIpcRing::all_reduce_queued(const Tensor&, ReduceOp, const cuda::Event&) {
  ENGINE_FAIL("ipc_ring all_reduce: CUDA is not built in");
}

void CudaIpcRing::check() const {}

std::string CudaIpcRing::unsupported_reason(int) {
  return "CUDA is not built in (configure with -DENGINE_CUDA=ON on a machine with nvcc)";
}

#endif  // ENGINE_WITH_CUDA

}  // namespace engine::comm
