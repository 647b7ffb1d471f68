// comm/backends/cuda_ipc/protocol/cpu_mem_ops.h: the memory-operations policy of the protocols on
// the CPU (threads as ranks, tests/comm/test_ipc_protocols.cpp): std::atomic_ref acquire/release
// for flags and counters, relaxed 8-byte atomics for LL lines, a team of one thread (a GPU block's
// barrier is a no-op here). The GPU's policy is gpu_mem_ops.cuh; ll.h and simple.h take either.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "comm/backends/cuda_ipc/protocol/layout.h"

namespace engine::comm::ipc::proto {

struct CpuMemOps {
  // A spin reads the clock this often: each turn yields, which may take a time slice.
  static constexpr uint32_t kSpinsPerCheck = 4;
  static uint64_t load_acquire(const uint64_t* p) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
  }
  static void store_release(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
  }
  // LL: data and flag in one store, no ordering with anything else.
  static uint64_t load_line(const uint64_t* p) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_relaxed);
  }
  static void store_line(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_relaxed);
  }
  static uint32_t load_acquire32(const uint32_t* p) {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
  }
  static void store_release32(uint32_t* p, uint32_t v) {
    std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
  }
  // The first claimant of an error record (0 -> kWriting) writes it.
  static bool claim(uint32_t* state) {
    uint32_t expected = 0;
    return std::atomic_ref<uint32_t>(*state).compare_exchange_strong(expected, 1,
                                                                     std::memory_order_acq_rel);
  }
  // Slot data written by a peer: ordered by the acquire of its flag.
  static float load_data(const float* p) { return *p; }
  static void store_data(float* p, float v) { *p = v; }
  // The GPU's 16-byte accesses (p 16-byte aligned), here four floats each.
  static Vec4 load_data4(const float* p) { return {{p[0], p[1], p[2], p[3]}}; }
  static Vec4 load_local4(const float* p) { return load_data4(p); }
  static void store_data4(float* p, const Vec4& v) {
    for (int j = 0; j < 4; ++j) p[j] = v.v[j];
  }
  static uint64_t now_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  // A spin gives the core away: ranks and channels outnumber the cores.
  static void relax() { std::this_thread::yield(); }
  // The team (a GPU block): one thread.
  static int lane() { return 0; }
  static int lanes() { return 1; }
  static bool leader() { return true; }
  static void barrier() {}
  static bool all(bool ok) { return ok; }
  // LL's elements across the grid: one thread per rank.
  static int64_t grid_lane() { return 0; }
  static int64_t grid_lanes() { return 1; }
  // The team's leader publishes what it read before its peers' data reads (a GPU fence).
  static void acquire_fence() { std::atomic_thread_fence(std::memory_order_acquire); }
};

}  // namespace engine::comm::ipc::proto
