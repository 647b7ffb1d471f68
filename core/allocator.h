// core/allocator.h: memory for tensor storage.
// CPU: 64-byte aligned blocks, freed blocks kept in power-of-two size classes and reused.
// CUDA: the caching allocator of core/cuda (device memory), reached through the same calls.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace engine {

struct AllocatorStats {
  size_t bytes_in_use = 0;  // handed out and not yet freed
  size_t bytes_cached = 0;  // freed, kept for reuse
  size_t peak_bytes_in_use = 0;
  uint64_t allocs = 0, reuses = 0;
};

void* device_alloc(Device d, size_t nbytes);
void device_free(Device d, void* p, size_t nbytes);
AllocatorStats allocator_stats(Device d);
// Returns cached blocks to the system (CPU) or the driver (CUDA).
void empty_cache(Device d);

namespace cpu_allocator {
void* alloc(size_t nbytes);
void free(void* p, size_t nbytes);
AllocatorStats stats();
void empty_cache();
}  // namespace cpu_allocator

}  // namespace engine
