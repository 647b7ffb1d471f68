// core/block_pool.h: the books of a caching allocator, apart from the memory itself, so that the
// CPU tests can check them: blocks binned by size class, reused after free, and private pools for
// captured CUDA graphs.
//
// A captured graph replays the kernels of its capture at the addresses they had then, so while a
// graph is being captured every allocation comes from a pool that the graph owns (its private
// pool), and nothing the capture touched may go back to the general cache, where eager work could
// take it between two replays:
//   - during a capture, alloc takes from (or grows) the capture's private pool;
//   - a block freed during a capture goes to that private pool, even one allocated before it (the
//     captured work may have used it last);
//   - after the capture, blocks of a private pool freed by their tensors go back to that pool,
//     never to the general cache; eager allocations never take them;
//   - release_private (the graph destroyed) moves the pool's free blocks to the general cache;
//     its blocks still held by tensors go there when they are freed.
// Not thread-safe: the caller holds its own lock around every call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace engine {

class BlockPool {
 public:
  // sys_alloc: a new block of exactly n bytes from the system, nullptr when out of memory.
  // sys_free: gives one back.
  BlockPool(std::function<void*(size_t)> sys_alloc, std::function<void(void*)> sys_free);

  // A block of size class cls (the caller rounds); nullptr when the system has no memory left,
  // even after the general cache was given back (not during a capture: giving memory back then
  // would synchronise the device).
  void* alloc(size_t cls);
  // Returns the size class of a live block, or 0 when p is not one of this pool's live blocks.
  size_t live_class(const void* p) const;
  // p must be live (live_class(p) != 0).
  void free(void* p);
  // Gives every block of the general cache back to the system; private pools keep theirs.
  void release_cached();

  uint64_t create_private();  // a new private pool's id (never 0)
  // From now on alloc and free go to private pool id (see above); one capture at a time.
  void begin_capture(uint64_t id);
  void end_capture();
  bool capturing() const { return capturing_ != 0; }
  // The graph of pool id is gone: its free blocks join the general cache.
  void release_private(uint64_t id);

  AllocatorStats stats() const { return stats_; }
  // Bytes of free blocks held by private pools (not in stats().bytes_cached: no eager use).
  size_t bytes_in_private_pools() const { return private_free_bytes_; }

 private:
  using Bins = std::unordered_map<size_t, std::vector<void*>>;
  struct Live {
    size_t cls = 0;
    uint64_t pool = 0;  // 0: the general pool
  };
  static void* take(Bins& bins, size_t cls);

  std::function<void*(size_t)> sys_alloc_;
  std::function<void(void*)> sys_free_;
  Bins cached_;                                 // the general cache
  std::unordered_map<uint64_t, Bins> private_;  // private pool id -> its free blocks
  std::unordered_map<void*, Live> live_;
  uint64_t capturing_ = 0, next_id_ = 1;
  size_t private_free_bytes_ = 0;
  AllocatorStats stats_;
};

}  // namespace engine
