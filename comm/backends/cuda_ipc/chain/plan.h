// comm/backends/cuda_ipc/chain/plan.h: the event-chained ring's schedule (protocol
// events, docs/ring.md): for (rank, W, step of the call), what the step's kernel reads and writes,
// and the rule that chains the steps of neighbouring ranks. Pure and header-only: the CUDA ring
// (chain/event_chain.cu) and the CPU test (tests/comm/test_ipc_event_chain.cpp) use the same.
//
// Pull model over comm/algorithms/ring_schedule.h's chunks (aligned to 4 floats). Each rank owns a
// buffer buf[count] that its right neighbour maps; `data` is the caller's tensor. A call is
// 2W-1 steps, i in [0, 2W-1):
//   i = 0            CopyIn  buf[r]      = data[r]                        (chunk r only)
//   i = 1+s, s<W-1   Reduce  buf[c]      = data[c] op left.buf[c],  c = r-s-1
//                    (s = W-2 is final: c = r+1, the chunk r owns; /W for AVG; data[c] = buf[c])
//   i = W+t, t<W-1   Gather  buf[c] = data[c] = left.buf[c],        c = r-t
// (chunks mod W). Step i reads exactly the chunk that left wrote in its step i-1, and writes a
// chunk that right does not read in its step i (right reads c+1): so a step needs only both
// neighbours' previous step done, and may run beside their same step. Chunk c is reduced along
// the ring from rank c (raw) to its owner c-1, always in that order, and then copied: every rank
// ends with the same bits.
#pragma once
#include <cstdint>

#include "comm/algorithms/ring_schedule.h"

namespace engine::comm::ipc::chain {

// The step chain. Steps k = 1, 2, ... count across calls (2W-1 per call). Rank r's step k:
//   (a) host: wait until recorded[left] >= k-1 and recorded[right] >= k-1 (bounded);
//   (b) stream: wait for left's and right's event slot (k-1) % K (once when left == right);
//   (c) stream: the step's kernel;  (d) stream: record own event slot k % K;
//   (e) host: recorded[r] = k (release).
// Why K slots suffice (K >= 2): rank r re-records slot k % K at step k+K only after (a) saw both
// neighbours at recorded >= k+K-1 >= k+1, and a neighbour records k+1 after it enqueued (b) of its
// step k+1, its wait on slot k % K. So every wait on a slot is enqueued before the slot is
// recorded again, and it binds to the record of exactly step k (the wait captures the slot's
// latest record; the neighbour cannot have gone past k yet: it would need r at k+K-1 > k).
// Should a driver bind a wait to the record that is latest when the wait RUNS instead, one more
// host wait makes it hold all the same:
//   (a') host: wait until both neighbours' step k-K+1 has completed on the device (an event
//        query of their slot (k-K+1) % K, which they cannot record again before r records k).
// A neighbour's step k-K+1 ran after its wait on r's step k-K, so that wait has run before r
// records the slot again. (a') waits only for work already enqueued (the neighbour recorded
// k-1 >= k-K+1), so it cannot deadlock; it lets the host run at most K-1 steps ahead of its
// neighbours' device.
constexpr int kEventSlots = 4;

inline int event_slot(uint64_t step) {
  return static_cast<int>(step % kEventSlots);
}
inline int steps_per_call(int world) {
  return 2 * world - 1;
}

enum class StepKind : uint8_t { CopyIn, Reduce, Gather };

// One step's kernel: over range (elements) of buf, data and left.buf.
struct StepWork {
  StepKind kind = StepKind::CopyIn;
  int chunk = 0;
  Range range;           // chunk's elements
  bool to_data = false;  // also store into data (the chunk is final)
  bool divide = false;   // AVG: divide by W (the final reduce)
};

// Element i of a step: x = data[i], l = left.buf[i]; the result goes to buf[i] (and data[i] when
// to_data). The CUDA kernel and the CPU test compute exactly this.
template <class Op>
ENGINE_HD float step_value(StepKind kind, float x, float l, Op op, float divide_by) {
  const float v = kind == StepKind::CopyIn ? x : kind == StepKind::Reduce ? op(x, l) : l;
  return divide_by != 0.f ? v / divide_by : v;
}

inline RingSchedule chain_schedule(int rank, int world, size_t count) {
  return RingSchedule(rank, world, count, 0, 4);
}

// Step i of the call (0 <= i < steps_per_call(world)), for rank `rank` of `world`.
inline StepWork plan_step(const RingSchedule& s, int i, bool avg) {
  const int W = s.world();
  StepWork w;
  if (i == 0) {
    w.kind = StepKind::CopyIn;
    w.chunk = s.send_chunk(RingPhase::ReduceScatter, 0);  // r
  } else if (i < W) {
    w.kind = StepKind::Reduce;
    w.chunk = s.recv_chunk(RingPhase::ReduceScatter, i - 1);  // r-s-1
    w.to_data = i == W - 1;
    w.divide = w.to_data && avg;
  } else {
    w.kind = StepKind::Gather;
    w.chunk = s.recv_chunk(RingPhase::AllGather, i - W);  // r-t
    w.to_data = true;
  }
  w.range = s.chunk(w.chunk);
  return w;
}

}  // namespace engine::comm::ipc::chain
