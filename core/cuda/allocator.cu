// core/cuda/allocator.cu: the CUDA caching allocator.
//
// cudaMalloc and cudaFree are slow (cudaFree synchronises the device), and a training step frees
// and reallocates the same sizes every iteration. So freed blocks are not returned to the driver:
// they are kept in bins keyed by size class, per device, and handed out again for the next request
// of the same class. Size classes: multiples of 512 B below 1 MiB, multiples of 2 MiB from 1 MiB
// up. empty_cache() gives the cached blocks back to the driver. The books themselves, with the
// private pools of captured CUDA graphs, are core/block_pool.h's.
//
// Reuse is safe without events because all of the engine's device work, core's copies included,
// runs in order on each device's compute stream (core/cuda/stream.cuh): a block freed by the
// host is only reused by work queued after the work that used it. Work on another stream (NCCL's
// comm stream) must finish, or be waited for by the compute stream, before its buffers are freed.
#include <array>
#include <mutex>

#include "core/block_pool.h"
#include "core/cuda/allocator.cuh"
#include "core/cuda/check.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::cuda {
namespace {

constexpr size_t kSmallQuantum = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeQuantum = size_t{2} << 20;
constexpr int kMaxDevices = 64;

size_t round_up(size_t n, size_t q) {
  return (n + q - 1) / q * q;
}

// The bytes a request really takes: its size class. A 0-byte request still gets a unique block.
size_t size_class(size_t nbytes) {
  if (nbytes == 0) return kSmallQuantum;
  return nbytes < kLargeThreshold ? round_up(nbytes, kSmallQuantum)
                                  : round_up(nbytes, kLargeQuantum);
}

// The books (core/block_pool.h) of one device, behind a lock; the memory is cudaMalloc's.
struct Pool {
  std::mutex mu;
  int device = 0;
  BlockPool books{[this](size_t n) { return malloc_block(n); },
                  [this](void* b) {
                    DeviceGuard guard(device);
                    CUDA_CHECK(cudaFree(b));
                  }};

  // nullptr when the device is out of memory.
  void* malloc_block(size_t cls) {
    void* b = nullptr;
    DeviceGuard guard(device);
    // During a graph's capture the calling thread may not call cudaMalloc in the capture's
    // strict mode (it is not stream-ordered); the allocation itself is what the graph needs.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (books.capturing()) CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    cudaError_t err = cudaMalloc(&b, cls);
    if (books.capturing()) CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    CUDA_CHECK(err);
    return b;
  }
};

// Never destroyed: at exit the driver may already be gone, so cached blocks are left to it.
Pool& pool(int device) {
  check_cuda_device(device);
  ENGINE_CHECK(device < kMaxDevices, "cuda:", device, ": at most ", kMaxDevices, " devices");
  static auto* pools = [] {
    auto* all = new std::array<Pool, kMaxDevices>();
    for (int d = 0; d < kMaxDevices; ++d) (*all)[d].device = d;
    return all;
  }();
  return (*pools)[device];
}

}  // namespace

void* alloc(int device, size_t nbytes) {
  Pool& p = pool(device);
  const size_t cls = size_class(nbytes);
  std::lock_guard<std::mutex> lock(p.mu);
  void* b = p.books.alloc(cls);
  if (!b)
    ENGINE_FAIL("cuda:", device, " out of memory allocating ", cls, " bytes (",
                p.books.stats().bytes_in_use, " bytes in use by the engine",
                p.books.capturing() ? ", during a CUDA graph's capture" : "", ")");
  return b;
}

void free(int device, void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  const size_t cls = p.books.live_class(ptr);
  ENGINE_CHECK(cls != 0, "cuda::free: ", ptr, " is not a live block on cuda:", device);
  ENGINE_CHECK(size_class(nbytes) == cls, "cuda::free: block ", ptr, " of ", cls,
               " bytes freed with size ", nbytes);
  p.books.free(ptr);
}

AllocatorStats stats(int device) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  return p.books.stats();
}

void empty_cache(int device) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  ENGINE_CHECK(!p.books.capturing(), "cuda::empty_cache on cuda:", device,
               " during a CUDA graph's capture (cudaFree would synchronise the device)");
  p.books.release_cached();
}

uint64_t create_graph_pool(int device) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  return p.books.create_private();
}

void begin_graph_pool_capture(int device, uint64_t id) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  p.books.begin_capture(id);
}

void end_graph_pool_capture(int device) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  p.books.end_capture();
}

void release_graph_pool(int device, uint64_t id) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  p.books.release_private(id);
}

}  // namespace engine::cuda
