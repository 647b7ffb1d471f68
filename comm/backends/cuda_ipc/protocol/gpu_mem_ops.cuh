// comm/backends/cuda_ipc/protocol/gpu_mem_ops.cuh: the memory-operations policy of the protocols
// on the GPU (cpu_mem_ops.h is the CPU's): system-scope ld.acquire / st.release for flags and
// counters (peers are other processes, maybe other GPUs; the error record is host memory),
// relaxed system-scope 8-byte loads and stores for LL lines, L2 loads (ld.global.cg) of slot data
// a peer wrote (4 or 16 bytes per access), %globaltimer for the deadline. A team is a thread block:
// lane = threadIdx.x, the leader thread 0 waits, the block's barrier shares its result.
#pragma once
#include <cstdint>

#include "comm/backends/cuda_ipc/protocol/layout.h"

namespace engine::comm::ipc::proto {

#if defined(__CUDACC__)

struct GpuMemOps {
  static constexpr uint32_t kSpinsPerCheck = 256;

  __device__ static uint64_t load_acquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ static void store_release(uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ static uint64_t load_line(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ static void store_line(uint64_t* p, uint64_t v) {
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ static uint32_t load_acquire32(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ static void store_release32(uint32_t* p, uint32_t v) {
    asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  __device__ static bool claim(uint32_t* state) { return atomicCAS_system(state, 0u, 1u) == 0u; }
  __device__ static float load_data(const float* p) { return __ldcg(p); }
  __device__ static void store_data(float* p, float v) { *p = v; }
  // 16 bytes per access (p 16-byte aligned): slot data a peer wrote (L2), the user's buffer, and
  // stores to either.
  __device__ static Vec4 load_data4(const float* p) {
    const float4 t = __ldcg(reinterpret_cast<const float4*>(p));
    return {{t.x, t.y, t.z, t.w}};
  }
  __device__ static Vec4 load_local4(const float* p) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    return {{t.x, t.y, t.z, t.w}};
  }
  __device__ static void store_data4(float* p, const Vec4& v) {
    *reinterpret_cast<float4*>(p) = make_float4(v.v[0], v.v[1], v.v[2], v.v[3]);
  }
  __device__ static uint64_t now_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ static void relax() {}
  __device__ static int lane() { return static_cast<int>(threadIdx.x); }
  __device__ static int lanes() { return static_cast<int>(blockDim.x); }
  __device__ static bool leader() { return threadIdx.x == 0; }
  __device__ static void barrier() { __syncthreads(); }
  // The leader's acquire loads order its later reads; the fence and the barrier extend that to
  // every lane of the block.
  __device__ static bool all(bool ok) {
    if (threadIdx.x == 0) __threadfence_system();
    return __syncthreads_and(ok ? 1 : 0) != 0;
  }
  __device__ static int64_t grid_lane() {
    return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  }
  __device__ static int64_t grid_lanes() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
};

#endif  // __CUDACC__

}  // namespace engine::comm::ipc::proto
