// comm/backends/cuda_ipc/protocol/simple.h: the Simple all_reduce, over a memory-operations
// policy. The buffer is cut into g.channels parts (channel_part); channel c runs a whole ring
// allreduce over its part (reduce-scatter, then all-gather: the 2W-1 units of unit_of), moving
// each unit's chunk through a FIFO of g.slots slots of g.slot_elems floats in next's region:
//
//   sender (rank r, channel c)                 receiver (rank r+1, channel c)
//   wait tail[c] + slots >= sent + 1           wait head[c] >= taken + 1
//   write slot sent % slots of next's FIFO     read slot taken % slots of its own FIFO
//   release next.head[c] = ++sent              release prev.tail[c] = ++taken
//
// Order: piece k (slot-sized, at offset k * slot_elems of its chunk) of units 0..2W-2, then piece
// k + 1: the sender's unit u and the receiver's unit u + 1 see the same chunk, so the slots leave
// and arrive in the same order; two slots per FIFO suffice (one is held while the next waits).
// One release (and one flag) per slot; head and tail count slots across calls (the host passes
// where each call starts: channel_slots), so nothing is reset. The last slot of a chunk is
// partial; empty chunks take no slot (both sides agree: the schedule gives the sender's unit u
// and the receiver's unit u+1 the same chunk). Data moves 16 bytes per lane per access (Vec4,
// kUnroll loads in flight per lane): slots, channel parts and chunks start at multiples of
// kAlignElems = 4 floats, so only a user buffer that is not 16-byte aligned falls back to floats.
#pragma once
#include <cstdint>

#include "comm/backends/cuda_ipc/protocol/wait.h"

namespace engine::comm::ipc::proto {

// Each lane keeps kUnroll 16-byte loads of `in` (and of `local`) in flight before it stores.
constexpr int kUnroll = 4;
#if defined(__CUDA_ARCH__)
#define ENGINE_PROTO_UNROLL _Pragma("unroll")
#else
#define ENGINE_PROTO_UNROLL
#endif

// Where every pointer is 16-byte aligned, the lanes move n / 4 Vec4s (lane l: l, l + lanes, ...,
// kUnroll of them loaded before any is stored); the rest, and everything where a pointer is not
// aligned, one float at a time. in: a slot of this rank's FIFO; local: the user's buffer; out: a
// slot of next's FIFO.
template <int kKind, class Ops, class Op>
ENGINE_HD int64_t move_vec4(const Ops& ops, Op op, bool avg, float world, const float* in,
                            float* local, float* out, int64_t n) {
  constexpr bool kReadsIn = kKind != UnitKind::Send;
  constexpr bool kReadsLocal =
      kKind == UnitKind::Send || kKind == UnitKind::Reduce || kKind == UnitKind::Final;
  constexpr bool kWritesLocal = kKind == UnitKind::Final || kKind >= UnitKind::Copy;
  constexpr bool kWritesOut = kKind != UnitKind::LastCopy;
  const auto bits = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if (((bits(in) | bits(local) | bits(out)) & 15u) != 0) return 0;
  const int64_t n4 = n / 4, lanes = ops.lanes();
  for (int64_t base = ops.lane(); base < n4; base += lanes * kUnroll) {
    Vec4 x[kUnroll] = {}, y[kUnroll] = {};
    ENGINE_PROTO_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = base + u * lanes;
      if (k >= n4) continue;
      if constexpr (kReadsIn) x[u] = ops.load_data4(in + 4 * k);
      if constexpr (kReadsLocal) y[u] = ops.load_local4(local + 4 * k);
    }
    ENGINE_PROTO_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = base + u * lanes;
      if (k >= n4) continue;
      Vec4 v;
      for (int j = 0; j < 4; ++j) v.v[j] = unit_elem<kKind>(op, x[u].v[j], y[u].v[j], avg, world);
      if constexpr (kWritesLocal) ops.store_data4(local + 4 * k, v);
      if constexpr (kWritesOut) ops.store_data4(out + 4 * k, v);
    }
  }
  return n4 * 4;
}

// The team's lanes move n elements: 16 bytes per access where aligned (move_vec4), the tail (and
// unaligned buffers) one float per access.
template <int kKind, class Ops, class Op>
ENGINE_HD void move_slot(const Ops& ops, Op op, bool avg, float world, const float* in,
                         float* local, float* out, int64_t n) {
  constexpr bool kReadsIn = kKind != UnitKind::Send;
  constexpr bool kReadsLocal =
      kKind == UnitKind::Send || kKind == UnitKind::Reduce || kKind == UnitKind::Final;
  constexpr bool kWritesLocal = kKind == UnitKind::Final || kKind >= UnitKind::Copy;
  constexpr bool kWritesOut = kKind != UnitKind::LastCopy;
  const int64_t head = move_vec4<kKind>(ops, op, avg, world, in, local, out, n);
  for (int64_t i = head + ops.lane(); i < n; i += ops.lanes()) {
    const float x = kReadsIn ? ops.load_data(in + i) : 0.f;
    const float y = kReadsLocal ? local[i] : 0.f;
    const float v = unit_elem<kKind>(op, x, y, avg, world);
    if constexpr (kWritesLocal) local[i] = v;
    if constexpr (kWritesOut) ops.store_data(out + i, v);
  }
}

template <class Ops, class Op>
ENGINE_HD void move_unit(const Ops& ops, Op op, const CallArgs& a, int kind, const float* in,
                         float* local, float* out, int64_t n) {
  const float w = static_cast<float>(a.g.world);
  switch (kind) {
    case UnitKind::Send:
      return move_slot<UnitKind::Send>(ops, op, a.avg, w, in, local, out, n);
    case UnitKind::Reduce:
      return move_slot<UnitKind::Reduce>(ops, op, a.avg, w, in, local, out, n);
    case UnitKind::Final:
      return move_slot<UnitKind::Final>(ops, op, a.avg, w, in, local, out, n);
    case UnitKind::Copy:
      return move_slot<UnitKind::Copy>(ops, op, a.avg, w, in, local, out, n);
    default:
      return move_slot<UnitKind::LastCopy>(ops, op, a.avg, w, in, local, out, n);
  }
}

// A channel's position in its FIFOs.
struct Cursor {
  uint64_t sent, taken;
};

// One slot of unit u (kind `kind`): elements [lo, lo + n) of the buffer.
template <class Ops, class Op>
ENGINE_HD bool simple_slot(const Ops& ops, const CallArgs& a, Op op, int c, int u, int kind,
                           int64_t lo, int64_t n, Cursor& cur) {
  const int W = a.g.world, r = a.rank, next = (r + 1) % W, prev = (r + W - 1) % W;
  const Region own = region_of(a, r), nx = region_of(a, next);
  const bool takes = kind != UnitKind::Send, sends = kind != UnitKind::LastCopy;
  bool ok = true;
  if (ops.leader()) {
    if (takes)
      ok = wait_counter(ops, a, own.head + c * kStride, cur.taken + 1,
                        WaitInfo{prev, c, kSlotData, u});
    const auto S = static_cast<uint64_t>(a.g.slots);
    if (ok && sends && cur.sent + 1 > S)
      ok = wait_counter(ops, a, own.tail + c * kStride, cur.sent + 1 - S,
                        WaitInfo{next, c, kSlotCredit, u});
  }
  if (!ops.all(ok)) return false;
  const int64_t S = a.g.slots, E = a.g.slot_elems;
  const float* in = own.fifo + (c * S + static_cast<int64_t>(cur.taken % S)) * E;
  float* out = nx.fifo + (c * S + static_cast<int64_t>(cur.sent % S)) * E;
  move_unit(ops, op, a, kind, in, a.data + lo, out, n);
  ops.barrier();
  if (takes) ++cur.taken;
  if (sends) ++cur.sent;
  if (ops.leader()) {
    if (takes) ops.store_release(region_of(a, prev).tail + c * kStride, cur.taken);
    if (sends) ops.store_release(nx.head + c * kStride, cur.sent);
  }
  return true;
}

// Channel c's whole call on one team. Channel 0's team announces the call words; every channel
// checks the peers' before its first slot.
template <class Ops, class Op>
ENGINE_HD bool simple_channel(const Ops& ops, const CallArgs& a, Op op, int c) {
  if (c == 0 && ops.leader()) announce(ops, a);
  bool ok = true;
  if (ops.leader()) ok = check_peers(ops, a, c);
  if (!ops.all(ok)) return false;
  const Range part = channel_part(a.count, a.g.channels, c);
  const RingSchedule s(a.rank, a.g.world, part.size(), 0, kAlignElems);
  const auto E = static_cast<size_t>(a.g.slot_elems);
  const auto pieces =
      static_cast<size_t>(slots_for(static_cast<int64_t>(s.max_chunk()), a.g.slot_elems));
  Cursor cur{a.sent0[c], a.taken0[c]};
  // Piece k of every unit before piece k + 1 of any (NCCL's loop): unit-major order would fill
  // the FIFOs of every rank with unit 0 and wait for credits forever.
  for (size_t k = 0; k < pieces; ++k) {
    for (int u = 0; u < 2 * a.g.world - 1; ++u) {
      const Unit unit = unit_of(s, u);
      const Range ch = s.chunk(unit.chunk);
      const size_t lo = ch.begin + k * E;
      if (lo >= ch.end) continue;  // this chunk has fewer pieces (a partial last slot before)
      const auto n = static_cast<int64_t>(ch.end - lo < E ? ch.end - lo : E);
      const auto at = static_cast<int64_t>(part.begin + lo);
      if (!simple_slot(ops, a, op, c, u, unit.kind, at, n, cur)) return false;
    }
  }
  if (ops.leader()) ops.store_release(&a.err->done[c], a.seq);
  return true;
}

}  // namespace engine::comm::ipc::proto
