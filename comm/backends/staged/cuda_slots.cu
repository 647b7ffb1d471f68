// comm/backends/staged/cuda_slots.cu: the staged pipeline's CUDA side (cuda_slots.h). Why the
// unpipelined path's small uploads are slow, as far as a reading can tell: each call creates an
// event and ends in cudaStreamSynchronize of the comm stream after the upload, so the host waits
// for the upload's completion (and, with two contexts time-sliced on one GPU, for the other
// context's slice) before the call returns. Here the host never waits for an upload: the slot's
// upload event orders the slot's next download on the device, and the compute stream waits for
// the last upload; the events are made once.
#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>
#include <vector>

#include "comm/backends/staged/cuda_slots.h"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/error.h"

namespace engine::comm::staged {
namespace {

class CudaSlots final : public DeviceSlots {
 public:
  CudaSlots(int device, int slots, size_t slot_bytes)
      : device_(device), slot_bytes_(slot_bytes), host_(slots), down_(slots), up_(slots) {
    cuda::DeviceGuard g(device_);
    try {
      CUDA_CHECK(cudaStreamCreateWithFlags(&up_stream_, cudaStreamNonBlocking));
      for (int s = 0; s < slots; ++s) {
        CUDA_CHECK(cudaHostAlloc(&host_[s], slot_bytes_, cudaHostAllocPortable));
        CUDA_CHECK(cudaEventCreateWithFlags(&down_[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&up_[s], cudaEventDisableTiming));
      }
    } catch (...) {
      release();
      throw;
    }
  }
  // Queued copies use the slots: they end before the slots go (errors ignored: at exit the driver
  // may be gone first).
  ~CudaSlots() override {
    try {
      cuda::DeviceGuard g(device_);
      release();
    } catch (const std::exception&) {
    }
  }
  int device() const override { return device_; }
  size_t slot_bytes() const override { return slot_bytes_; }
  int slots() const override { return static_cast<int>(host_.size()); }

  void begin(const CollContext& c, void* data, const cuda::Event* ready) override {
    c_ = &c;
    data_ = static_cast<char*>(data);
    cuda::comm_after(device_, ready);
  }
  void download(const Segment& seg, int slot) override {
    cuda::DeviceGuard g(device_);
    cudaStream_t comm = cuda::comm_stream(device_);
    CUDA_CHECK(cudaStreamWaitEvent(comm, up_[slot], 0));  // a never-recorded event: no wait
    CUDA_CHECK(
        cudaMemcpyAsync(host_[slot], data_ + seg.offset, seg.bytes, cudaMemcpyDeviceToHost, comm));
    CUDA_CHECK(cudaEventRecord(down_[slot], comm));
  }
  void wait(int slot) override;
  void host_reduce(const Segment& seg, int slot) override {
    host_reduce_segment(*c_, seg, host_[slot]);
  }
  void upload(int slot, const Segment& seg) override {
    cuda::DeviceGuard g(device_);
    CUDA_CHECK(cudaMemcpyAsync(data_ + seg.offset, host_[slot], seg.bytes, cudaMemcpyHostToDevice,
                               up_stream_));
    CUDA_CHECK(cudaEventRecord(up_[slot], up_stream_));
    last_up_ = slot;
  }
  void finish() override {
    cuda::DeviceGuard g(device_);
    // Uploads run in order on one stream: the last one's event covers them all.
    CUDA_CHECK(cudaStreamWaitEvent(cuda::compute_stream(device_), up_[last_up_], 0));
  }

 private:
  int device_;
  size_t slot_bytes_;
  std::vector<void*> host_;
  std::vector<cudaEvent_t> down_, up_;
  cudaStream_t up_stream_ = nullptr;
  const CollContext* c_ = nullptr;
  char* data_ = nullptr;
  int last_up_ = 0;

  // Waits for what was queued, then frees what was made (on device_, current).
  void release() {
    if (up_stream_) (void)cudaStreamSynchronize(up_stream_);
    (void)cudaStreamSynchronize(cuda::comm_stream(device_));
    for (size_t s = 0; s < host_.size(); ++s) {
      if (host_[s]) (void)cudaFreeHost(host_[s]);
      if (down_[s]) (void)cudaEventDestroy(down_[s]);
      if (up_[s]) (void)cudaEventDestroy(up_[s]);
    }
    if (up_stream_) (void)cudaStreamDestroy(up_stream_);
  }
};

// Polls the slot's download event: bounded by the call's timeout, naming what it waited for.
void CudaSlots::wait(int slot) {
  cuda::DeviceGuard g(device_);
  const Deadline deadline = c_->deadline();
  for (;;) {
    const cudaError_t e = cudaEventQuery(down_[slot]);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
    ENGINE_CHECK(!deadline.expired(), "comm on rank ", c_->rank(), ": ", c_->fp.str(),
                 ": the staged download into slot ", slot, " on cuda:", device_,
                 " did not finish within the timeout");
    std::this_thread::yield();
  }
}

}  // namespace

std::unique_ptr<DeviceSlots> make_cuda_slots(int device, int slots, size_t slot_bytes) {
  return std::make_unique<CudaSlots>(device, slots, slot_bytes);
}

}  // namespace engine::comm::staged
