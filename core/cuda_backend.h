// core/cuda_backend.h: the CUDA side of core's device plumbing: device discovery, the caching
// allocator, host<->device copies and core's elementwise kernels (fill, axpy, scale).
// Implemented in core/cuda/*.cu when the build has CUDA (ENGINE_WITH_CUDA), and by
// core/cuda_absent.cpp otherwise, where every call but device_count() throws engine::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "core/device.h"

namespace engine::cuda {

int device_count();                // 0 when no driver or GPU answers
std::string unavailable_reason();  // "" when a device answers

// The 16 bytes of cuda:device's UUID (cudaDeviceProp::uuid): the same GPU in every process,
// whatever its index there (CUDA_VISIBLE_DEVICES renumbers).
std::string device_uuid(int device);
// Whether cuda:device can map cuda:peer's memory (cudaDeviceCanAccessPeer).
bool can_access_peer(int device, int peer);

// The device of this process (the rank's), for the threads that touch CUDA: the program sets it
// once it has chosen (train after its device choice, gpu_selftest, the benchmarks), which also
// makes it current on the calling thread; every other thread that touches CUDA (the communicator's
// worker, the NCCL watchdog) calls enter_home_device() first. Until a thread has a device, the
// runtime would create a context on GPU 0 at its first call: with 8 ranks, 7 extra contexts there.
void set_home_device(int device);
int home_device();  // -1 when none was set (a CPU run)
// Makes the home device current on the calling thread, once; a no-op when none was set (so a CPU
// run never touches CUDA) or when the thread already has a device. Never throws (thread starts):
// a failure shows at the thread's first CUDA call.
void enter_home_device() noexcept;
// Makes `device` current on the calling thread for good (a thread that works on one device).
void set_thread_device(int device);

// Caching allocator: blocks binned by size class, reused after free, per device.
void* alloc(int device, size_t nbytes);
void free(int device, void* p, size_t nbytes);
AllocatorStats stats(int device);
void empty_cache(int device);

// Copies nbytes between any two of host and device memory; synchronous for the caller: host
// memory may be read or reused on return, and device memory is ordered with the devices' compute
// streams (a copy within one device, or between two, is queued there: no host wait).
void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes);

// The streams of each device (core/cuda/stream.cuh): every kernel on Compute, collectives on
// Comm, uploads of the next batch on Copy.
enum class Stream : uint8_t { Compute, Comm, Copy };

// Page-locked host memory: copies to and from it run asynchronously at full PCIe speed. Portable
// (every device may use it); allocated in `device`'s context, the one the caller works on, so
// that no other device gets a context for it.
void* alloc_pinned(size_t nbytes, int device);
void free_pinned(void* p, int device);  // nullptr is fine; device: alloc_pinned's

// A copy queued on stream s of `device`, returning at once. Host memory must be pinned; device
// memory must be `device`'s. The caller orders it (Event) and waits for it before touching dst.
void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes,
                int device, Stream s);
// The device's free memory in bytes (cudaMemGetInfo), for ENGINE_DATA_ON_DEVICE=auto.
size_t free_memory(int device);

// Blocks the host until stream s of `device` has finished its queued work.
void synchronize(int device, Stream s);

// A point in one stream of one device (a cudaEvent_t without timing), owned; movable.
class Event {
 public:
  Event() = default;
  ~Event();
  Event(Event&& o) noexcept : ev_(o.ev_), device_(o.device_) { o.ev_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Records the work queued so far on stream s of `device`.
  static Event record(int device, Stream s);
  bool defined() const { return ev_ != nullptr; }
  int device() const { return device_; }
  // Stream s of device() waits for this point (on the device; the host goes on).
  void block(Stream s) const;
  // True once the recorded work has finished (never blocks).
  bool done() const;
  // Blocks the host until the recorded work has finished.
  void synchronize() const;

 private:
  void* ev_ = nullptr;
  int device_ = -1;
};

// Before a collective on `device`: its comm stream waits (on the device) for `ready`, or, when
// null, for all the compute work queued so far.
void comm_after(int device, const Event* ready);

// Elementwise on device memory (float32): p[i] = v; dst[i] += alpha * src[i]; p[i] *= s.
void fill_f32(int device, float* p, float v, int64_t n);
void axpy_f32(int device, float* dst, const float* src, float alpha, int64_t n);
void scale_f32(int device, float* p, float s, int64_t n);

}  // namespace engine::cuda
