// comm/backends/cuda_ipc/ipc_ring_kernel.cuh: the fused reduce-copy kernel of the CUDA IPC ring
// (the schedule, hand-off and waits are explained in comm/backends/cuda_ipc/cuda_ipc_ring.h). One
// launch is one whole all_reduce: block b runs the 2W-1 units of the ring over segments b,
// b+gridDim, ... of each chunk.
#pragma once
#include <cstdint>

#include "comm/algorithms/ring_schedule.h"  // RingSchedule: the chunks and segments of every unit
#include "comm/backends/cuda_ipc/protocol/layout.h"  // UnitKind, unit_of, unit_elem
#include "kernels/reduce.h"                          // SumOp, ProdOp, MaxOp, MinOp (ENGINE_HD)

namespace engine::comm::ipc {

constexpr int kThreads = 512;               // per block
constexpr int kMaxBlocks = 64;              // done counters per region, wait records per call
constexpr int kUnroll = 4;                  // float4 loads in flight per thread
constexpr int kAlign = proto::kAlignElems;  // chunks start at multiples of 4 floats: 16-byte
                                            // aligned segments

// What thread 0 of a block was waiting for when it gave up; in host-mapped memory, written by the
// kernel (state last), read by the host once the kernel has ended.
enum WaitState : uint32_t { None = 0, TimedOut = 1, Aborted = 2 };
struct WaitRecord {
  uint32_t state;
  int32_t unit;     // the ring unit; -1: the wait for next's done counters
  int32_t chunk;    // unit -1: next's block whose counter lagged
  int32_t segment;  // within the chunk
  uint64_t waited_ns;
  uint64_t seen;    // the counter's last value
  uint64_t wanted;  // the value waited for
};
struct Control {
  uint32_t abort;  // set by the host: every spin gives up at its next check
  uint32_t pad;
  WaitRecord waits[kMaxBlocks];  // one per block of this rank's grid
};

struct RingArgs {
  float* data;          // the user's buffer, count floats (in place)
  const float* own_rs;  // this rank's region: staging written by prev
  const float* own_ag;
  const uint64_t* own_flags;  // [2][world][nseg_cap], written by prev
  const uint64_t* own_done;   // [kMaxBlocks], written by next's blocks
  float* next_rs;             // next's region (mapped)
  float* next_ag;
  uint64_t* next_flags;
  uint64_t* prev_done;  // prev's done counters (mapped): this rank's block b writes [b]
  Control* ctl;         // device address of the host-mapped control block
  uint64_t seq;         // this call's sequence number, from 1
  uint64_t timeout_ns;  // per wait
  int64_t count;        // elements of data
  int64_t seg_elems;    // a multiple of 4
  int64_t nseg;         // segments per chunk in this call: ring_schedule(...).segments(seg_elems)
  int64_t nseg_cap;     // the flags' stride per (phase, chunk)
  int rank, world;
  int next_blocks;  // done counters to wait on: next's grid
  bool avg;         // divide the final sums by world
  bool vec;         // data is 16-byte aligned: float4 loads and stores
};

// The units of the ring for rank r, each on chunk `chunk` (indices mod W):
//   Send       unit 0           next.rs = local
//   Reduce     unit 1..W-2      next.rs = rs op local
//   Final      unit W-1         local = next.ag = rs op local (/W for AVG)
//   Copy       unit W..2W-3     local = next.ag = ag
//   LastCopy   unit 2W-2        local = ag
// Unit u < 2W-2 moves the chunk that step u of the schedule (comm/algorithms/ring_schedule.h, both
// phases in a row) sends: the one step u-1 received. The last unit stores what the last step
// received. The kinds, the units and their elements are the protocols' (protocol/layout.h): one
// definition for the blocking kernel and Simple.
using proto::UnitKind;
using RingUnit = proto::Unit;

// The schedule of a call on rank `rank`: comm/algorithms/ring_schedule.h's, chunks aligned to
// kAlign elements.
ENGINE_HD RingSchedule ring_schedule(int64_t count, int rank, int world) {
  return RingSchedule(rank, world, static_cast<size_t>(count), 0, kAlign);
}

ENGINE_HD RingUnit ring_unit(const RingSchedule& s, int u) {
  return proto::unit_of(s, u);
}

// Flags: phase 0 for reduce-scatter data (units 0..W-2 write it, 1..W-1 read it), phase 1 for
// all-gather data (units W-1..2W-3 write it, W..2W-2 read it). Unit 0 reads none, 2W-2 writes none.
ENGINE_HD int ring_in_phase(int u, int world) {
  return u <= world - 1 ? 0 : 1;
}
ENGINE_HD int ring_out_phase(int u, int world) {
  return u <= world - 2 ? 0 : 1;
}
ENGINE_HD int64_t ring_flag_index(int phase, int chunk, int64_t segment, int world,
                                  int64_t nseg_cap) {
  return (static_cast<int64_t>(phase) * world + chunk) * nseg_cap + segment;
}

// Elements [lo, hi) of segment j of chunk c: the schedule's segment; empty (lo >= hi) past the
// chunk's end, and then so are the chunk's later segments.
struct RingSpan {
  int64_t lo, hi;
};
ENGINE_HD RingSpan ring_span(const RingSchedule& s, int chunk, int64_t j, int64_t seg_elems) {
  const Range r = s.segment(chunk, static_cast<size_t>(j), static_cast<size_t>(seg_elems));
  return {static_cast<int64_t>(r.begin), static_cast<int64_t>(r.end)};
}

// One element of a unit: `in` from this rank's staging, `local` from the user's buffer.
template <int kKind, class Op>
ENGINE_HD float ring_elem(Op op, float in, float local, bool avg, float world) {
  return proto::unit_elem<kKind>(op, in, local, avg, world);
}

#if defined(__CUDACC__)

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t load_volatile(const uint64_t* p) {
  return *static_cast<const volatile uint64_t*>(p);
}

__device__ __forceinline__ void store_volatile(uint64_t* p, uint64_t v) {
  *static_cast<volatile uint64_t*>(p) = v;
}

// Thread 0 only: spins until *p >= want; false (with a wait record) on timeout or host abort.
__device__ inline bool spin_until(Control* ctl, uint64_t timeout_ns, const uint64_t* p,
                                  uint64_t want, int unit, int chunk, int64_t segment) {
  uint64_t seen = load_volatile(p);
  if (seen >= want) return true;
  const uint64_t start = globaltimer_ns();
  for (uint32_t spin = 1;; ++spin) {
    seen = load_volatile(p);
    if (seen >= want) return true;
    if ((spin & 255u) != 0) continue;
    const uint64_t waited = globaltimer_ns() - start;
    const bool timed_out = waited > timeout_ns;
    const bool aborted = *static_cast<const volatile uint32_t*>(&ctl->abort) != 0;
    if (timed_out || aborted) {
      volatile WaitRecord* w = &ctl->waits[blockIdx.x];
      w->unit = unit;
      w->chunk = chunk;
      w->segment = static_cast<int32_t>(segment);
      w->waited_ns = waited;
      w->seen = seen;
      w->wanted = want;
      __threadfence_system();
      w->state = timed_out ? WaitState::TimedOut : WaitState::Aborted;
      return false;
    }
  }
}

// The whole block waits for *p >= want (thread 0 spins). Acquire: the fence after the flag and
// the barrier order the block's later reads after the writer's data. Uniform result.
__device__ __forceinline__ bool block_wait(const RingArgs& a, const uint64_t* p, uint64_t want,
                                           int unit, int chunk, int64_t segment) {
  int ok = 1;
  if (threadIdx.x == 0) {
    ok = spin_until(a.ctl, a.timeout_ns, p, want, unit, chunk, segment) ? 1 : 0;
    __threadfence_system();
  }
  return __syncthreads_and(ok) != 0;
}

// Release: the barrier orders every thread's stores (to the peer) and loads (of our staging)
// before thread 0's system-scope fence, which orders them before its store of v into *p (the
// fence is cumulative over what the barrier made thread 0 observe; the pattern of NCCL's
// protocols and of cooperative groups' grid sync).
__device__ __forceinline__ void block_signal(uint64_t* p, uint64_t v) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    store_volatile(p, v);
  }
}

__device__ __forceinline__ float4 ring_elem4(float4 in, float4 local, auto f) {
  return make_float4(f(in.x, local.x), f(in.y, local.y), f(in.z, local.z), f(in.w, local.w));
}

// One segment of unit kKind: elements [lo, lo + n) of the buffer (and of the staging, which
// mirrors the buffer's indices). Staging is read with ld.global.cg: it is written by another GPU,
// so it must come from L2, never from a stale L1 line.
template <int kKind, class Op>
__device__ __forceinline__ void move_segment(const RingArgs& a, Op op, int64_t lo, int64_t n) {
  constexpr bool kReadsLocal =
      kKind == UnitKind::Send || kKind == UnitKind::Reduce || kKind == UnitKind::Final;
  constexpr bool kReadsIn = kKind != UnitKind::Send;
  constexpr bool kWritesLocal =
      kKind == UnitKind::Final || kKind == UnitKind::Copy || kKind == UnitKind::LastCopy;
  constexpr bool kWritesNext = kKind != UnitKind::LastCopy;
  float* local = a.data + lo;
  const float* in =
      (kKind == UnitKind::Reduce || kKind == UnitKind::Final ? a.own_rs : a.own_ag) + lo;
  float* out = (kKind == UnitKind::Send || kKind == UnitKind::Reduce ? a.next_rs : a.next_ag) + lo;
  const bool avg = a.avg;
  const float world = static_cast<float>(a.world);
  auto f = [op, avg, world](float x, float y) { return ring_elem<kKind>(op, x, y, avg, world); };

  int64_t head = 0;
  if (a.vec) {
    const int64_t n4 = n / 4;
    float4* local4 = reinterpret_cast<float4*>(local);
    const float4* in4 = reinterpret_cast<const float4*>(in);
    float4* out4 = reinterpret_cast<float4*>(out);
    for (int64_t base = threadIdx.x; base < n4; base += static_cast<int64_t>(kThreads) * kUnroll) {
      float4 x[kUnroll] = {}, y[kUnroll] = {};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t k = base + static_cast<int64_t>(u) * kThreads;
        if (k < n4) {
          if constexpr (kReadsIn) x[u] = __ldcg(in4 + k);
          if constexpr (kReadsLocal) y[u] = local4[k];
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t k = base + static_cast<int64_t>(u) * kThreads;
        if (k < n4) {
          const float4 v = ring_elem4(x[u], y[u], f);
          if constexpr (kWritesLocal) local4[k] = v;
          if constexpr (kWritesNext) out4[k] = v;
        }
      }
    }
    head = n4 * 4;
  }
  for (int64_t i = head + threadIdx.x; i < n; i += kThreads) {
    const float x = kReadsIn ? __ldcg(in + i) : 0.f;
    const float y = kReadsLocal ? local[i] : 0.f;
    const float v = f(x, y);
    if constexpr (kWritesLocal) local[i] = v;
    if constexpr (kWritesNext) out[i] = v;
  }
}

template <class Op>
__global__ void __launch_bounds__(kThreads) ipc_ring_kernel(const RingArgs a, const Op op) {
  // Next's staging (and flags) may be written once each of next's blocks has finished the
  // previous call, i.e. has read everything this rank wrote there then.
  {
    int ok = 1;
    if (threadIdx.x == 0) {
      for (int k = 0; k < a.next_blocks && ok; ++k)
        ok = spin_until(a.ctl, a.timeout_ns, a.own_done + k, a.seq - 1, -1, k, -1) ? 1 : 0;
      __threadfence_system();
    }
    if (!__syncthreads_and(ok)) return;
  }
  const int world = a.world;
  const RingSchedule sched = ring_schedule(a.count, a.rank, world);
  for (int u = 0; u < 2 * world - 1; ++u) {
    const RingUnit unit = ring_unit(sched, u);
    for (int64_t j = blockIdx.x; j < a.nseg; j += gridDim.x) {
      const RingSpan span = ring_span(sched, unit.chunk, j, a.seg_elems);
      const int64_t lo = span.lo, hi = span.hi;
      if (lo >= hi) break;  // the rest of this chunk is past the end of the buffer
      if (unit.kind != UnitKind::Send) {
        const uint64_t* flag = a.own_flags + ring_flag_index(ring_in_phase(u, world), unit.chunk, j,
                                                             world, a.nseg_cap);
        if (!block_wait(a, flag, a.seq, u, unit.chunk, j)) return;
      }
      switch (unit.kind) {
        case UnitKind::Send:
          move_segment<UnitKind::Send>(a, op, lo, hi - lo);
          break;
        case UnitKind::Reduce:
          move_segment<UnitKind::Reduce>(a, op, lo, hi - lo);
          break;
        case UnitKind::Final:
          move_segment<UnitKind::Final>(a, op, lo, hi - lo);
          break;
        case UnitKind::Copy:
          move_segment<UnitKind::Copy>(a, op, lo, hi - lo);
          break;
        default:
          move_segment<UnitKind::LastCopy>(a, op, lo, hi - lo);
          break;
      }
      if (unit.kind != UnitKind::LastCopy)
        block_signal(a.next_flags + ring_flag_index(ring_out_phase(u, world), unit.chunk, j, world,
                                                    a.nseg_cap),
                     a.seq);
    }
  }
  // This block has read all of its staging for this call: prev may reuse it.
  block_signal(a.prev_done + blockIdx.x, a.seq);
}

#endif  // __CUDACC__

}  // namespace engine::comm::ipc
