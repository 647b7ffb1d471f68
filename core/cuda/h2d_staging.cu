// core/cuda/h2d_staging.cu: host -> device copies from pageable memory, made safe and kept
// asynchronous (see h2d_staging.cuh).
//
// Why: cudaMemcpyAsync from pageable memory returns once the driver has staged the source only by
// observed behaviour ("might be synchronous", says the CUDA documentation), and callers free the
// source at once (Tensor::from_vector's temporaries, Communicator::recv, optimizer-state restore).
// Synchronising instead would stall the host on all compute work queued before the copy, in the
// middle of a step (Tensor::zeros on a GPU is an upload). So each device has a ring of pinned
// memory: the source is memcpy'd into the next free bytes, the DMA is queued from there on the
// compute stream, and an event marks when those bytes are free again. The host waits only when the
// ring is full of copies the GPU has not reached yet.
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "core/cuda/check.cuh"
#include "core/cuda/h2d_staging.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#include "core/error.h"
#include "core/sync_guard.h"

namespace engine::cuda {
namespace {

constexpr size_t kRingBytes = size_t{8} << 20;  // per device
constexpr size_t kAlign = 256;

struct Span {
  size_t begin, end;
  cudaEvent_t done;  // recorded after the copy out of [begin, end)
};

struct Ring {
  std::mutex mu;
  char* base = nullptr;
  size_t head = 0;            // next byte to hand out
  std::deque<Span> inflight;  // oldest first
  std::vector<cudaEvent_t> spare;

  // Bytes [offset, offset + n) free for a new copy; waits for the oldest copies when full.
  size_t take(size_t n) {
    for (;;) {
      while (!inflight.empty() && query(inflight.front().done)) retire();
      if (inflight.empty()) head = 0;
      const size_t tail = inflight.empty() ? kRingBytes : inflight.front().begin;
      // Wrapped, head stays strictly below tail, so head == tail never means a full ring.
      if (head >= tail || inflight.empty()) {  // free: [head, end) and [0, tail)
        if (head + n <= kRingBytes) return head;
        if (n < tail && !inflight.empty()) return head = 0;
      } else if (head + n < tail) {  // free: [head, tail)
        return head;
      }
      sync_guard::note("host -> device staging ring full (waits for an upload)");
      CUDA_CHECK(cudaEventSynchronize(inflight.front().done));
    }
  }
  static bool query(cudaEvent_t e) {
    const cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) return false;
    CUDA_CHECK(q);
    return true;
  }
  void retire() {
    spare.push_back(inflight.front().done);
    inflight.pop_front();
  }
  cudaEvent_t event() {
    if (spare.empty()) {
      cudaEvent_t e = nullptr;
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      return e;
    }
    cudaEvent_t e = spare.back();
    spare.pop_back();
    return e;
  }
};

constexpr int kMaxDevices = 64;

Ring& ring(int device) {
  ENGINE_CHECK(device >= 0 && device < kMaxDevices, "cuda:", device, ": at most ", kMaxDevices,
               " devices");
  static auto* all = new Ring[kMaxDevices];  // never freed: at exit the driver may be gone first
  return all[device];
}

}  // namespace

void upload_pageable(void* dst, const void* src, size_t nbytes, int device) {
  Ring& r = ring(device);
  DeviceGuard guard(device);
  cudaStream_t s = compute_stream(device);
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.base) r.base = static_cast<char*>(alloc_pinned(kRingBytes, device));
  for (size_t off = 0; off < nbytes;) {
    const size_t piece = std::min(nbytes - off, kRingBytes / 2);
    const size_t at = r.take((piece + kAlign - 1) / kAlign * kAlign);
    std::memcpy(r.base + at, static_cast<const char*>(src) + off, piece);
    CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + off, r.base + at, piece,
                               cudaMemcpyHostToDevice, s));
    const cudaEvent_t done = r.event();
    CUDA_CHECK(cudaEventRecord(done, s));
    const size_t end = at + (piece + kAlign - 1) / kAlign * kAlign;
    r.inflight.push_back({at, end, done});
    r.head = end;
    off += piece;
  }
}

}  // namespace engine::cuda
