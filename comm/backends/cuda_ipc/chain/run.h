// comm/backends/cuda_ipc/chain/run.h: the host side of one event-chained all_reduce (plan.h):
// the bounded host waits on the neighbours' step counters, the call check, and the order of
// (stream wait, kernel, record, counter) per step. A template over the rank's device operations,
// so the CUDA ring (event_chain.cu: IPC events, kernels on the comm stream) and the CPU test
// (fake streams on threads) run this same code.
//
// Ops (one rank's device side; every call only enqueues):
//   void stream_wait(int peer, int slot)  the stream waits for peer's event slot's latest record
//   void launch(const StepWork& w)        the step's kernel
//   void record(int slot)                 records this rank's event slot after the kernel
//   bool peer_done(int peer, int slot)    peer's event slot's latest record has completed (a
//                                         query, never blocks: cudaEventQuery)
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "comm/backends/cuda_ipc/chain/plan.h"
#include "comm/base/deadline.h"
#include "comm/base/reduce.h"
#include "core/error.h"

namespace engine::comm::ipc::chain {

constexpr int kMaxRanks = 64;
constexpr uint64_t kSharedMagic = 0x4e49414843435049ull;  // "IPCCHAIN"

// One rank's host words, written by that rank only (a cache line each).
struct alignas(64) RankWords {
  uint64_t recorded;  // the last step whose stream record this rank has enqueued
  uint64_t seq;       // its current call: number, count, op (published before its step 0)
  uint64_t count;
  uint64_t op;
};

// The shared host segment (POSIX shm between the ranks' processes; plain memory in the test).
struct Shared {
  uint64_t magic;
  int64_t world;
  RankWords ranks[kMaxRanks];
};

struct CallSpec {
  int rank = 0, world = 1;
  size_t count = 0;
  ReduceOp op = ReduceOp::Sum;
  Millis timeout{30000};
};

// This rank's position in the chain: steps recorded and calls made (from 0).
struct ChainState {
  uint64_t step = 0;
  uint64_t seq = 0;
};

inline uint64_t load_acquire(const uint64_t& w) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_acquire);
}
inline uint64_t load_relaxed(const uint64_t& w) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_relaxed);
}
inline void store_release(uint64_t& w, uint64_t v) {
  std::atomic_ref<uint64_t>(w).store(v, std::memory_order_release);
}
inline void store_relaxed(uint64_t& w, uint64_t v) {
  std::atomic_ref<uint64_t>(w).store(v, std::memory_order_relaxed);
}

inline std::string call_text(const CallSpec& c, uint64_t seq) {
  return detail::concat("ipc_ring (events) all_reduce #", seq, " of ", c.count, " floats (",
                        reduce_op_name(c.op), ") on rank ", c.rank, " of ", c.world);
}

// Host wait (a) of plan.h: until `peer` has recorded step `need`; bounded by c.timeout.
inline void wait_recorded(const Shared& sh, const CallSpec& c, uint64_t seq, int peer,
                          const char* role, uint64_t need) {
  const uint64_t& w = sh.ranks[peer].recorded;
  if (load_acquire(w) >= need) return;
  const Deadline deadline = Deadline::after(c.timeout);
  for (int polls = 0; load_acquire(w) < need; ++polls) {
    if (deadline.expired())
      throw TimeoutError(detail::concat(call_text(c, seq), ": rank ", peer, " (", role,
                                        ") did not record step ", need, " within ",
                                        c.timeout.count(), " ms; the ring is broken"));
    if (polls < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 20000 ? 10 : 100));
  }
}

// (a') of plan.h: until `peer`'s step `step` has completed on the device (bounded).
template <class Ops>
void wait_done(Ops& ops, const CallSpec& c, uint64_t seq, int peer, const char* role,
               uint64_t step) {
  if (ops.peer_done(peer, event_slot(step))) return;
  const Deadline deadline = Deadline::after(c.timeout);
  for (int polls = 0; !ops.peer_done(peer, event_slot(step)); ++polls) {
    if (deadline.expired())
      throw TimeoutError(detail::concat(call_text(c, seq), ": step ", step, " of rank ", peer, " (",
                                        role, ") did not finish on the device within ",
                                        c.timeout.count(), " ms; the ring is broken"));
    if (polls < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// The call check: `peer` (past its step 0 of this call) called with this rank's (seq, count, op).
inline void check_peer_call(const Shared& sh, const CallSpec& c, uint64_t seq, int peer,
                            const char* role) {
  const RankWords& p = sh.ranks[peer];
  const uint64_t ps = load_relaxed(p.seq), pc = load_relaxed(p.count), po = load_relaxed(p.op);
  if (ps == seq && pc == c.count && po == static_cast<uint64_t>(c.op)) return;
  const char* pname =
      po <= static_cast<uint64_t>(ReduceOp::Prod) ? reduce_op_name(static_cast<ReduceOp>(po)) : "?";
  ENGINE_FAIL(call_text(c, seq), ": rank ", peer, " (", role, ") called all_reduce #", ps, " of ",
              pc, " floats (", pname,
              "): every rank must call with the same count and op; the ring is broken");
}

// One all_reduce of c.count floats: its 2W-1 steps, enqueued on `ops` in chain order. Throws
// TimeoutError naming a neighbour that does not record its step within c.timeout, and
// engine::Error naming one that called with another count or op.
template <class Ops>
void run_call(Shared& sh, Ops& ops, const CallSpec& c, ChainState& st) {
  const RingSchedule s = chain_schedule(c.rank, c.world, c.count);
  const int left = s.left(), right = s.right();
  const uint64_t seq = ++st.seq;
  RankWords& me = sh.ranks[c.rank];
  store_relaxed(me.seq, seq);  // published by the release of step 0's counter
  store_relaxed(me.count, c.count);
  store_relaxed(me.op, static_cast<uint64_t>(c.op));
  for (int i = 0; i < steps_per_call(c.world); ++i) {
    const uint64_t k = st.step + 1;
    wait_recorded(sh, c, seq, left, "left", k - 1);
    if (right != left) wait_recorded(sh, c, seq, right, "right", k - 1);
    if (k > kEventSlots) {  // (a'): slot k % K is free on the device too
      wait_done(ops, c, seq, left, "left", k - kEventSlots + 1);
      if (right != left) wait_done(ops, c, seq, right, "right", k - kEventSlots + 1);
    }
    if (i == 1) {  // both neighbours are past their step 0 of this call
      check_peer_call(sh, c, seq, left, "left");
      if (right != left) check_peer_call(sh, c, seq, right, "right");
    }
    if (k > 1) {
      ops.stream_wait(left, event_slot(k - 1));
      if (right != left) ops.stream_wait(right, event_slot(k - 1));
    }
    ops.launch(plan_step(s, i, c.op == ReduceOp::Avg));
    ops.record(event_slot(k));
    store_release(me.recorded, k);
    st.step = k;
  }
}

}  // namespace engine::comm::ipc::chain
