// comm/backends/cuda_ipc/protocol/wait.h: the bounded waits of the protocols, over a
// memory-operations policy (cpu_mem_ops.h, gpu_mem_ops.cuh), and the error record they write:
//  - every spin reads the clock every Ops::kSpinsPerCheck turns and gives up after the call's
//  timeout, or at once
//    when the host raises `abort`, another lane of this rank failed, or a peer broadcast a failure
//    of this call into this rank's `fault` word;
//  - the call words: every rank announces (seq, count, op, dtype) to every peer before it moves
//    data, and checks every peer's before it reads any (a mismatch names the peer);
//  - a timed-out wait names the rank at the end of the chain of waits: each channel publishes in
//    its own region whom it waits for, so a rank that waits for prev, which waits for its own prev,
//    names the one that waits for nobody (dead, silent, or stuck outside the call).
// The first failure of a rank is broadcast into every peer's `fault` word: the peers stop within a
// few spins and name the same culprit.
#pragma once
#include <cstdint>

#include "comm/backends/cuda_ipc/protocol/layout.h"

namespace engine::comm::ipc::proto {

struct WaitInfo {
  int peer;     // the rank whose store is waited for
  int channel;  // Simple's channel (LL: 0)
  int what;     // WaitWhat
  int unit;     // Simple's ring unit, else -1
};

ENGINE_HD Region region_of(const CallArgs& a, int q) {
  return region_at(a.regions[q], a.layout);
}

// This rank's claim on its error record: a word of its own region (device memory on the GPU, where
// atomics are atomic; the record itself is host memory), never written by a peer.
ENGINE_HD uint32_t* claim_word(const CallArgs& a) {
  return reinterpret_cast<uint32_t*>(region_of(a, a.rank).fault + kStride / 2);
}

// Fills the record (first failure of this rank wins) and broadcasts the culprit to every peer.
template <class Ops>
ENGINE_HD void record(const Ops& ops, const CallArgs& a, uint32_t kind, const WaitInfo& w,
                      int culprit, uint64_t seen, uint64_t wanted, uint64_t seen1,
                      uint64_t waited) {
  ErrorRecord* e = a.err;
  if (!ops.claim(claim_word(a))) return;
  e->kind = kind;
  e->peer = culprit;
  e->neighbour = w.peer;
  e->channel = w.channel;
  e->what = w.what;
  e->unit = w.unit;
  e->seq = a.seq;
  e->seen = seen;
  e->wanted = wanted;
  e->seen1 = seen1;
  e->waited_ns = waited;
  ops.store_release32(&e->state, kSet);
  if (kind == kAborted || kind == kPeerFailed) return;
  const uint64_t f = (static_cast<uint64_t>(a.seq) << 32) | (static_cast<uint64_t>(a.rank) << 16) |
                     static_cast<uint64_t>(culprit + 1);
  for (int q = 0; q < a.g.world; ++q)
    if (q != a.rank) ops.store_release(region_of(a, q).fault, f);
}

// Why a wait must stop now (0: it need not): the host's abort, an earlier failure of this rank, or
// a peer's broadcast failure of this call (recorded here as kPeerFailed).
template <class Ops>
ENGINE_HD uint32_t stop_reason(const Ops& ops, const CallArgs& a, const WaitInfo& w) {
  if (ops.load_acquire32(&a.err->abort) != 0) return kAborted;
  if (ops.load_acquire32(claim_word(a)) != 0) return kAborted;
  const uint64_t f = ops.load_acquire(region_of(a, a.rank).fault);
  if (word_seq(f) == a.seq && (f & 0xFFFF) != 0) {
    const int culprit = static_cast<int>(f & 0xFFFF) - 1,
              reporter = static_cast<int>(f >> 16) & 0xFFFF;
    const WaitInfo by{reporter, w.channel, w.what, w.unit};
    record(ops, a, kPeerFailed, by, culprit == a.rank ? reporter : culprit, 0, 0, 0, 0);
    return kPeerFailed;
  }
  return 0;
}

// The end of the chain of waits that starts at w.peer on channel w.channel.
template <class Ops>
ENGINE_HD int chain_end(const Ops& ops, const CallArgs& a, int start, int channel) {
  int x = start;
  for (int hops = 0; hops < a.g.world; ++hops) {
    const uint64_t v = ops.load_acquire(region_of(a, x).waiting + channel * kStride);
    const int y = static_cast<int>(v & 0xFFFF) - 1;
    if (word_seq(v) != a.seq || y < 0 || y == a.rank || y == x) return x;
    x = y;
  }
  return x;
}

// Spins until ready(load(p)); false once it has recorded why not. `line`: LL's relaxed load.
template <class Ops, class Ready>
ENGINE_HD bool bounded_wait(const Ops& ops, const CallArgs& a, const uint64_t* p, bool line,
                            Ready ready, uint64_t wanted, const WaitInfo& w) {
  uint64_t v = line ? ops.load_line(p) : ops.load_acquire(p);
  if (ready(v)) return true;
  const uint64_t start = ops.now_ns();
  uint64_t* waiting = region_of(a, a.rank).waiting + w.channel * kStride;
  // Whom this channel waits for, at once: a peer that times out on this rank follows it.
  const bool published = w.what != kLlData;
  if (published) ops.store_release(waiting, (static_cast<uint64_t>(a.seq) << 32) | (w.peer + 1));
  for (uint32_t spin = 1;; ++spin) {
    v = line ? ops.load_line(p) : ops.load_acquire(p);
    if (ready(v)) break;
    ops.relax();
    if ((spin % Ops::kSpinsPerCheck) != 0) continue;
    const uint64_t waited = ops.now_ns() - start;
    const uint32_t why = stop_reason(ops, a, w);
    if (why == kAborted) record(ops, a, kAborted, w, w.peer, v, wanted, 0, waited);
    if (why != 0) return false;
    if (waited > a.timeout_ns) {
      const int culprit = w.what == kSlotData || w.what == kSlotCredit
                              ? chain_end(ops, a, w.peer, w.channel)
                              : w.peer;
      record(ops, a, kTimeout, w, culprit, v, wanted, 0, waited);
      return false;
    }
  }
  if (published) ops.store_release(waiting, static_cast<uint64_t>(a.seq) << 32);
  return true;
}

// Waits until the counter *p reaches want.
template <class Ops>
ENGINE_HD bool wait_counter(const Ops& ops, const CallArgs& a, const uint64_t* p, uint64_t want,
                            const WaitInfo& w) {
  return bounded_wait(
      ops, a, p, false, [want](uint64_t v) { return v >= want; }, want, w);
}

// This rank's call words into every peer's hello[seq & 1][rank]: count first, then word0 with
// release (a peer that sees word0 sees the count).
template <class Ops>
ENGINE_HD void announce(const Ops& ops, const CallArgs& a) {
  const int parity = static_cast<int>(a.seq & 1u);
  for (int q = 0; q < a.g.world; ++q) {
    if (q == a.rank) continue;
    uint64_t* h = region_of(a, q).hello + (parity * kMaxRanks + a.rank) * 2;
    ops.store_release(h + 1, a.words.w1);
    ops.store_release(h, a.words.w0);
  }
}

// Waits for every peer's call words of this call and compares them with this rank's.
template <class Ops>
ENGINE_HD bool check_peers(const Ops& ops, const CallArgs& a, int channel) {
  const int parity = static_cast<int>(a.seq & 1u);
  const Region own = region_of(a, a.rank);
  for (int q = 0; q < a.g.world; ++q) {
    if (q == a.rank) continue;
    const uint64_t* h = own.hello + (parity * kMaxRanks + q) * 2;
    const WaitInfo w{q, channel, kHello, -1};
    const uint32_t seq = a.seq;
    if (!bounded_wait(
            ops, a, h, false, [seq](uint64_t v) { return seq_at_least(word_seq(v), seq); },
            a.words.w0, w))
      return false;
    const uint64_t w0 = ops.load_acquire(h), w1 = ops.load_acquire(h + 1);
    if (w0 != a.words.w0 || w1 != a.words.w1) {
      record(ops, a, kMismatch, w, q, w0, a.words.w0, w1, 0);
      return false;
    }
  }
  return true;
}

}  // namespace engine::comm::ipc::proto
