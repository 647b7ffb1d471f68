// comm/algorithms/halving_doubling.cpp: Rabenseifner's all_reduce (MPICH's for long messages).
//
// The buffer is cut into p blocks (p = 4 here, b0..b3; sizes differ by at most one element).
// Reduce-scatter by recursive halving, distance d = p/2, p/4, ..., 1: rank v and v XOR d split the
// blocks they are both still working on; each keeps the half on its side of d, sends the other
// half to its partner, and combines the partner's copy of the kept half into its own:
//   d = 2   0<->2 1<->3   0,1 keep b0 b1 (send b2 b3); 2,3 keep b2 b3     (n/2 bytes each way)
//   d = 1   0<->1 2<->3   rank v keeps b_v, now summed over all four ranks (n/4 bytes)
// All-gather by recursive doubling, d = 1, 2, ..., p/2: the same pairs in reverse order swap the
// finished blocks they hold, doubling them each round, until every rank holds all p.
// Sends and receives of one round touch disjoint blocks, so a receive combines straight into the
// buffer as its bytes arrive. Each block is finished on one rank and copied from there, so every
// rank ends with the same bits. Any W: the extra ranks fold in first and get the result at the end
// (pow2.h). Safety as recursive doubling: every result depends on checked frames from every rank.
#include "comm/algorithms/halving_doubling.h"

#include "comm/algorithms/pow2.h"
#include "core/error.h"

namespace engine::comm {

namespace {

// Blocks [b0, b1) of p over n elements, as elements: block b starts at b*(n/p) + min(b, n%p).
Range blocks(size_t n, int p, int b0, int b1) {
  const size_t q = n / p, rest = n % p;
  auto at = [&](int b) { return b * q + std::min<size_t>(b, rest); };
  return {at(b0), at(b1)};
}

// Reduce-scatter by recursive halving: rank v ends with block v reduced over all virtual ranks.
void halve(const CollContext& c, std::byte* buf, const Pow2& P, int v, Deadline dl) {
  const size_t n = c.fp.count;
  int round = 1;
  for (int d = P.p2 / 2; d >= 1; d /= 2, ++round) {
    const int lo = v & ~(2 * d - 1), peer = P.real(v ^ d);
    const bool low = (v & d) == 0;
    const Range keep = low ? blocks(n, P.p2, lo, lo + d) : blocks(n, P.p2, lo + d, lo + 2 * d);
    const Range give = low ? blocks(n, P.p2, lo + d, lo + 2 * d) : blocks(n, P.p2, lo, lo + d);
    exchange(c, buf, peer, round, give, keep, true, dl);
    observe_round(c, "rh", "reduce-scatter", round, peer, give, peer, keep, true, buf);
  }
}

// All-gather by recursive doubling: rank v holds block v, ends with all p.
void double_up(const CollContext& c, std::byte* buf, const Pow2& P, int v, Deadline dl) {
  const size_t n = c.fp.count;
  int round = P.rounds() + 1;
  for (int d = 1; d < P.p2; d *= 2, ++round) {
    const int mine = v & ~(d - 1), theirs = (v ^ d) & ~(d - 1), peer = P.real(v ^ d);
    const Range give = blocks(n, P.p2, mine, mine + d), get = blocks(n, P.p2, theirs, theirs + d);
    exchange(c, buf, peer, round, give, get, false, dl);
    observe_round(c, "rh", "all-gather", round, peer, give, peer, get, false, buf);
  }
}

}  // namespace

void rh_all_reduce(const CollContext& c, void* data) {
  const int W = c.world(), r = c.rank();
  if (W == 1) return;
  ENGINE_CHECK(data || c.fp.count == 0, "all_reduce: null buffer");
  auto* buf = static_cast<std::byte*>(data);
  const size_t n = c.fp.count;
  const Range all{0, n};
  const Pow2 P(W);
  const Deadline dl = c.deadline();
  const int v = P.vrank(r), folded = P.fold_partner(r), last = 2 * P.rounds() + 1;
  if (v < 0) {  // sits out: hands its buffer over, gets the result back
    exchange(c, buf, folded, 0, all, kNoRange, false, dl);
    observe_round(c, "rh", "fold", 0, folded, all, -1, {}, false, buf);
    exchange(c, buf, folded, last, kNoRange, all, false, dl);
    observe_round(c, "rh", "unfold", last, -1, {}, folded, all, false, buf);
    return;
  }
  if (folded >= 0) {
    exchange(c, buf, folded, 0, kNoRange, all, true, dl);
    observe_round(c, "rh", "fold", 0, -1, {}, folded, all, true, buf);
  }
  halve(c, buf, P, v, dl);
  if (c.fp.redop == ReduceOp::Avg) {
    const Range own = blocks(n, P.p2, v, v + 1);
    divide_by(buf + own.begin * dtype_size(c.fp.dtype), own.size(), c.fp.dtype, W);
  }
  double_up(c, buf, P, v, dl);
  if (folded >= 0) {
    exchange(c, buf, folded, last, all, kNoRange, false, dl);
    observe_round(c, "rh", "unfold", last, folded, all, -1, {}, false, buf);
  }
}

}  // namespace engine::comm
