// comm/backends/cuda_ipc/protocol/ll.h: the LL ("low latency") all_reduce, one hop to every peer
// (W <= kMaxLlRanks), over a memory-operations policy. Each rank stores every element of its
// buffer into every peer's LL buffer as one 8-byte line (4 bytes of data, the 4-byte flag), so
// data and flag land together: no fence, no separate flag. Every rank then reduces the W values of
// each element locally, in rank order, so that every rank ends with the same bits.
//
// Rounds: a call moves ll_lines elements per round; round R (counted across calls, all ranks
// agree) uses the buffers [R & 1] and the flag R + 1 (never 0, the buffers' initial value), so
// nothing is reset. Reuse: a peer writes round R + 2 into the buffer of round R only after it has
// read this rank's round R + 1, which this rank writes after it has read round R (element by
// element, each lane owning the same elements in every round).
//
// The call words go out before the first round's lines and are checked before any line is read.
#pragma once
#include <cstdint>
#include <cstring>

#include "comm/backends/cuda_ipc/protocol/wait.h"

namespace engine::comm::ipc::proto {

ENGINE_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}
ENGINE_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Where rank `from`'s line i of round parity p lies in a region.
ENGINE_HD uint64_t* ll_line(const Region& r, const CallArgs& a, int p, int from, int64_t i) {
  return r.ll + (static_cast<int64_t>(p) * a.g.world + from) * a.g.ll_lines + i;
}

// Writes this lane's elements [base, base + n) of round `round` into every peer's buffer.
template <class Ops>
ENGINE_HD void ll_post(const Ops& ops, const CallArgs& a, uint64_t round, int64_t base, int64_t n) {
  const int p = static_cast<int>(round & 1u);
  const auto flag = static_cast<uint32_t>(round + 1);
  for (int64_t i = ops.grid_lane(); i < n; i += ops.grid_lanes()) {
    const uint64_t line = ll_pack(float_bits(a.data[base + i]), flag);
    for (int q = 0; q < a.g.world; ++q)
      if (q != a.rank) ops.store_line(ll_line(region_of(a, q), a, p, a.rank, i), line);
  }
}

// Reduces this lane's elements of round `round` from the W ranks' values, in rank order.
template <class Ops, class Op>
ENGINE_HD bool ll_reduce(const Ops& ops, const CallArgs& a, Op op, uint64_t round, int64_t base,
                         int64_t n) {
  const int p = static_cast<int>(round & 1u);
  const auto flag = static_cast<uint32_t>(round + 1);
  const Region own = region_of(a, a.rank);
  for (int64_t i = ops.grid_lane(); i < n; i += ops.grid_lanes()) {
    float acc = 0.f;
    for (int q = 0; q < a.g.world; ++q) {
      float v = a.data[base + i];
      if (q != a.rank) {
        const uint64_t* line = ll_line(own, a, p, q, i);
        const WaitInfo w{q, 0, kLlData, -1};
        if (!bounded_wait(
                ops, a, line, true, [flag](uint64_t l) { return ll_flag(l) == flag; }, flag, w))
          return false;
        v = bits_float(ll_data(ops.load_line(line)));
      }
      acc = q == 0 ? v : op(acc, v);
    }
    a.data[base + i] = a.avg ? acc / static_cast<float>(a.g.world) : acc;
  }
  return true;
}

// The whole call on this lane. `first_team`: the team that announces the call words (one per
// rank). The team's lanes check the peers' words together; every lane reduces its own elements.
template <class Ops, class Op>
ENGINE_HD bool ll_all_reduce(const Ops& ops, const CallArgs& a, Op op, bool first_team) {
  if (first_team && ops.leader()) announce(ops, a);
  const int64_t rounds = ll_rounds(a.count, a.g.ll_lines);
  for (int64_t k = 0; k < rounds; ++k) {
    const int64_t base = k * a.g.ll_lines;
    const int64_t n = a.count - base < a.g.ll_lines ? a.count - base : a.g.ll_lines;
    const uint64_t round = a.ll_round0 + static_cast<uint64_t>(k);
    ll_post(ops, a, round, base, n);
    if (k == 0) {
      bool ok = true;
      if (ops.leader()) ok = check_peers(ops, a, 0);
      if (!ops.all(ok)) return false;
    }
    if (!ops.all(ll_reduce(ops, a, op, round, base, n))) return false;
  }
  if (first_team && ops.leader()) ops.store_release(&a.err->done[0], a.seq);
  return true;
}

}  // namespace engine::comm::ipc::proto
