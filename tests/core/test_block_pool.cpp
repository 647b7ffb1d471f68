// tests/core/test_block_pool.cpp: the caching allocator's books (core/block_pool.h), with fake
// memory: reuse by size class, and the private pools of captured CUDA graphs.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "core/block_pool.h"
#include "core/error.h"

namespace engine {
namespace {

// Fake system memory: distinct addresses, a budget of bytes, every block given back counted.
struct FakeMemory {
  uintptr_t next = 0x1000;
  size_t budget = 1 << 20, used = 0;
  std::map<void*, size_t> outstanding;  // block -> bytes
  int frees = 0;
  BlockPool pool{[this](size_t n) -> void* {
                   if (used + n > budget) return nullptr;
                   used += n;
                   void* p = reinterpret_cast<void*>(next);
                   next += n;
                   outstanding[p] = n;
                   return p;
                 },
                 [this](void* p) {
                   used -= outstanding.at(p);
                   outstanding.erase(p);
                   ++frees;
                 }};
};

TEST(BlockPool, ReusesFreedBlocksOfTheSameClass) {
  FakeMemory m;
  void* a = m.pool.alloc(512);
  m.pool.free(a);
  EXPECT_EQ(m.pool.stats().bytes_cached, 512u);
  EXPECT_EQ(m.pool.alloc(1024) == a, false);  // another class: a new block
  EXPECT_EQ(m.pool.alloc(512), a);
  EXPECT_EQ(m.pool.stats().reuses, 1u);
  EXPECT_EQ(m.pool.live_class(a), 512u);
  EXPECT_EQ(m.pool.live_class(reinterpret_cast<void*>(0x7)), 0u);
}

TEST(BlockPool, OutOfMemoryGivesTheCacheBackAndRetries) {
  FakeMemory m;
  m.budget = 2048;
  void* a = m.pool.alloc(2048);
  m.pool.free(a);
  void* b = m.pool.alloc(1024);  // the cached 2048 block is given back first
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(m.frees, 1);
  EXPECT_EQ(m.pool.alloc(4096), nullptr);
}

TEST(BlockPool, CaptureAllocatesFromThePrivatePoolAndKeepsItsBlocks) {
  FakeMemory m;
  void* before = m.pool.alloc(512);  // an eager block the captured step frees
  const uint64_t id = m.pool.create_private();
  m.pool.begin_capture(id);
  void* x = m.pool.alloc(512);  // new: the general cache is not the capture's
  EXPECT_NE(x, before);
  m.pool.free(before);  // freed during the capture: the graph's from now on
  void* y = m.pool.alloc(512);
  EXPECT_EQ(y, before);  // reused within the capture (stream order holds in the graph)
  m.pool.free(y);
  m.pool.end_capture();
  EXPECT_EQ(m.pool.stats().bytes_cached, 0u);
  EXPECT_EQ(m.pool.bytes_in_private_pools(), 512u);
  // Eager work never takes the graph's blocks, even those freed after the capture.
  m.pool.free(x);
  void* z = m.pool.alloc(512);
  EXPECT_NE(z, x);
  EXPECT_NE(z, before);
  m.pool.release_cached();  // empty_cache leaves the graph's pool alone
  EXPECT_EQ(m.pool.bytes_in_private_pools(), 1024u);
  EXPECT_TRUE(m.pool.capturing() == false);
}

TEST(BlockPool, OutOfMemoryDuringCaptureGivesNothingBack) {
  FakeMemory m;
  m.budget = 1024;
  m.pool.free(m.pool.alloc(1024));
  const uint64_t id = m.pool.create_private();
  m.pool.begin_capture(id);
  EXPECT_EQ(m.pool.alloc(512), nullptr);  // freeing memory would synchronise the device
  EXPECT_EQ(m.frees, 0);
  m.pool.end_capture();
}

TEST(BlockPool, ReleasingTheGraphReturnsItsBlocksToTheGeneralCache) {
  FakeMemory m;
  const uint64_t id = m.pool.create_private();
  m.pool.begin_capture(id);
  void* kept = m.pool.alloc(512);  // held by a tensor past the graph (the loss)
  void* freed = m.pool.alloc(1024);
  m.pool.free(freed);
  m.pool.end_capture();
  m.pool.release_private(id);
  EXPECT_EQ(m.pool.bytes_in_private_pools(), 0u);
  EXPECT_EQ(m.pool.stats().bytes_cached, 1024u);
  EXPECT_EQ(m.pool.alloc(1024), freed);
  m.pool.free(kept);  // its pool is gone: the general cache
  EXPECT_EQ(m.pool.alloc(512), kept);
}

TEST(BlockPool, OneCaptureAtATime) {
  FakeMemory m;
  const uint64_t a = m.pool.create_private(), b = m.pool.create_private();
  EXPECT_NE(a, b);
  m.pool.begin_capture(a);
  EXPECT_THROW(m.pool.begin_capture(b), Error);
  EXPECT_THROW(m.pool.release_private(a), Error);
  m.pool.end_capture();
  EXPECT_THROW(m.pool.begin_capture(99), Error);
  EXPECT_THROW(m.pool.free(reinterpret_cast<void*>(0x3)), Error);
}

}  // namespace
}  // namespace engine
