// core/cuda/event.cu: engine::cuda::Event, pinned host memory, queued copies and stream
// synchronisation (see core/cuda_backend.h).
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"
#include "core/sync_guard.h"

namespace engine::cuda {
namespace {

cudaStream_t stream_of(int device, Stream s) {
  switch (s) {
    case Stream::Compute:
      return compute_stream(device);
    case Stream::Comm:
      return comm_stream(device);
    case Stream::Copy:
      return copy_stream(device);
  }
  ENGINE_FAIL("unknown stream ", static_cast<int>(s));
}

cudaEvent_t as_event(void* e) {
  return static_cast<cudaEvent_t>(e);
}

}  // namespace

void* alloc_pinned(size_t nbytes, int device) {
  DeviceGuard guard(device);
  void* p = nullptr;
  CUDA_CHECK(cudaHostAlloc(&p, nbytes == 0 ? 1 : nbytes, cudaHostAllocPortable));
  return p;
}

void free_pinned(void* p, int device) {
  if (!p) return;
  DeviceGuard guard(device);
  CUDA_CHECK(cudaFreeHost(p));
}

void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes,
                int device, Stream s) {
  if (nbytes == 0) return;
  ENGINE_CHECK((dst_dev.is_cpu() || dst_dev.index == device) &&
                   (src_dev.is_cpu() || src_dev.index == device),
               "copy_async on cuda:", device, ": ", src_dev.str(), " -> ", dst_dev.str());
  DeviceGuard guard(device);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream_of(device, s)));
}

void synchronize(int device, Stream s) {
  sync_guard::note("cuda::synchronize (a stream)");
  DeviceGuard guard(device);
  CUDA_CHECK(cudaStreamSynchronize(stream_of(device, s)));
}

Event::~Event() {
  if (ev_) {
    const cudaError_t e = cudaEventDestroy(as_event(ev_));
    (void)e;  // a destructor never throws; at exit the driver may be gone
  }
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (ev_) (void)cudaEventDestroy(as_event(ev_));
    ev_ = o.ev_;
    device_ = o.device_;
    o.ev_ = nullptr;
  }
  return *this;
}

Event Event::record(int device, Stream s) {
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(device, s);
  Event e;
  cudaEvent_t ev = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  e.ev_ = ev;
  e.device_ = device;
  CUDA_CHECK(cudaEventRecord(ev, stream));
  return e;
}

void Event::block(Stream s) const {
  ENGINE_CHECK(ev_, "Event::block on an event never recorded");
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaStreamWaitEvent(stream_of(device_, s), as_event(ev_), 0));
}

// done() and synchronize() run on threads that may have no device yet (the NCCL watchdog): the
// guard makes the event's device current instead of letting the runtime pick GPU 0.
bool Event::done() const {
  if (!ev_) return true;
  DeviceGuard guard(device_);
  const cudaError_t e = cudaEventQuery(as_event(ev_));
  if (e == cudaErrorNotReady) return false;
  CUDA_CHECK(e);
  return true;
}

void Event::synchronize() const {
  if (!ev_) return;
  sync_guard::note("cuda::Event::synchronize");
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaEventSynchronize(as_event(ev_)));
}

void comm_after(int device, const Event* ready) {
  if (ready)
    ready->block(Stream::Comm);
  else
    Event::record(device, Stream::Compute).block(Stream::Comm);
}

}  // namespace engine::cuda
