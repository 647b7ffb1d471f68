// core/cuda/allocator.cu: the CUDA caching allocator.
//
// cudaMalloc and cudaFree are slow (cudaFree synchronises the device), and a training step frees
// and reallocates the same sizes every iteration. So freed blocks are not returned to the driver:
// they are kept in bins keyed by size class, per device, and handed out again for the next request
// of the same class. Size classes: multiples of 512 B below 1 MiB, multiples of 2 MiB from 1 MiB
// up. empty_cache() gives the cached blocks back to the driver.
//
// Reuse is safe without events because all of the engine's device work, core's copies included,
// runs in order on each device's compute stream (core/cuda/stream.cuh): a block freed by the
// host is only reused by work queued after the work that used it. Work on another stream (NCCL's
// comm stream) must finish, or be waited for by the compute stream, before its buffers are freed.
#include <array>
#include <mutex>
#include <unordered_map>
#include <vector>

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

struct Pool {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> cached;  // size class -> free blocks
  std::unordered_map<void*, size_t> live;                 // block -> size class
  AllocatorStats stats;
};

// Never destroyed: at exit the driver may already be gone, so cached blocks are left to it.
Pool& pool(int device) {
  check_cuda_device(device);
  ENGINE_CHECK(device < kMaxDevices, "cuda:", device, ": at most ", kMaxDevices, " devices");
  static auto* pools = new std::array<Pool, kMaxDevices>();
  return (*pools)[device];
}

// cudaFree every cached block of `p`. Caller holds p.mu and has made the device current.
void release_cached(Pool& p) {
  for (auto& [cls, blocks] : p.cached) {
    while (!blocks.empty()) {  // one at a time, so the books stay right if cudaFree throws
      CUDA_CHECK(cudaFree(blocks.back()));
      blocks.pop_back();
      p.stats.bytes_cached -= cls;
    }
  }
  p.cached.clear();
}

void* malloc_block(Pool& p, int device, size_t cls) {
  void* b = nullptr;
  cudaError_t err = cudaMalloc(&b, cls);
  if (err == cudaErrorMemoryAllocation) {
    // Out of memory: blocks of other size classes may be what is filling the device.
    (void)cudaGetLastError();
    release_cached(p);
    err = cudaMalloc(&b, cls);
  }
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    ENGINE_FAIL("cuda:", device, " out of memory allocating ", cls, " bytes (",
                p.stats.bytes_in_use, " bytes in use by the engine)");
  }
  CUDA_CHECK(err);
  return b;
}

}  // namespace

void* alloc(int device, size_t nbytes) {
  Pool& p = pool(device);
  const size_t cls = size_class(nbytes);
  std::lock_guard<std::mutex> lock(p.mu);
  void* b = nullptr;
  auto it = p.cached.find(cls);
  if (it != p.cached.end() && !it->second.empty()) {
    b = it->second.back();
    it->second.pop_back();
    p.stats.bytes_cached -= cls;
    ++p.stats.reuses;
  } else {
    DeviceGuard guard(device);
    b = malloc_block(p, device, cls);
  }
  p.live.emplace(b, cls);
  ++p.stats.allocs;
  p.stats.bytes_in_use += cls;
  if (p.stats.bytes_in_use > p.stats.peak_bytes_in_use)
    p.stats.peak_bytes_in_use = p.stats.bytes_in_use;
  return b;
}

void free(int device, void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.live.find(ptr);
  ENGINE_CHECK(it != p.live.end(), "cuda::free: ", ptr, " is not a live block on cuda:", device);
  const size_t cls = it->second;
  ENGINE_CHECK(size_class(nbytes) == cls, "cuda::free: block ", ptr, " of ", cls,
               " bytes freed with size ", nbytes);
  p.live.erase(it);
  p.cached[cls].push_back(ptr);
  p.stats.bytes_in_use -= cls;
  p.stats.bytes_cached += cls;
}

AllocatorStats stats(int device) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  return p.stats;
}

void empty_cache(int device) {
  Pool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  DeviceGuard guard(device);
  release_cached(p);
}

}  // namespace engine::cuda
