// core/allocator.cpp: the CPU pool allocator and the device switch in front of both allocators.
#include "core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/cuda_backend.h"

namespace engine {
namespace cpu_allocator {
namespace {

constexpr size_t kAlign = 64;

// Size class: the next power of two (at least 64 bytes). Freed blocks wait in their class.
size_t size_class(size_t nbytes) {
  return std::bit_ceil(std::max<size_t>(nbytes, kAlign));
}

struct Pool {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  AllocatorStats st;
  ~Pool() {
    for (auto& [sz, v] : free_blocks)
      for (void* p : v) std::free(p);
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: tensors may outlive static destructors
  return *p;
}

}  // namespace

void* alloc(size_t nbytes) {
  size_t c = size_class(nbytes);
  Pool& p = pool();
  {
    std::lock_guard lk(p.mu);
    auto& v = p.free_blocks[c];
    p.st.allocs++;
    if (!v.empty()) {
      void* b = v.back();
      v.pop_back();
      p.st.reuses++;
      p.st.bytes_cached -= c;
      p.st.bytes_in_use += c;
      p.st.peak_bytes_in_use = std::max(p.st.peak_bytes_in_use, p.st.bytes_in_use);
      return b;
    }
  }
  void* b = std::aligned_alloc(kAlign, c);
  if (!b) throw std::bad_alloc();
  std::lock_guard lk(p.mu);
  p.st.bytes_in_use += c;
  p.st.peak_bytes_in_use = std::max(p.st.peak_bytes_in_use, p.st.bytes_in_use);
  return b;
}

void free(void* b, size_t nbytes) {
  if (!b) return;
  size_t c = size_class(nbytes);
  Pool& p = pool();
  std::lock_guard lk(p.mu);
  p.free_blocks[c].push_back(b);
  p.st.bytes_in_use -= c;
  p.st.bytes_cached += c;
}

AllocatorStats stats() {
  std::lock_guard lk(pool().mu);
  return pool().st;
}

void empty_cache() {
  Pool& p = pool();
  std::lock_guard lk(p.mu);
  for (auto& [sz, v] : p.free_blocks)
    for (void* b : v) std::free(b);
  p.free_blocks.clear();
  p.st.bytes_cached = 0;
}

}  // namespace cpu_allocator

void* device_alloc(Device d, size_t nbytes) {
  return d.is_cpu() ? cpu_allocator::alloc(nbytes) : cuda::alloc(d.index, nbytes);
}
void device_free(Device d, void* p, size_t nbytes) {
  if (d.is_cpu())
    cpu_allocator::free(p, nbytes);
  else
    cuda::free(d.index, p, nbytes);
}
AllocatorStats allocator_stats(Device d) {
  return d.is_cpu() ? cpu_allocator::stats() : cuda::stats(d.index);
}
void empty_cache(Device d) {
  if (d.is_cpu())
    cpu_allocator::empty_cache();
  else
    cuda::empty_cache(d.index);
}

}  // namespace engine
