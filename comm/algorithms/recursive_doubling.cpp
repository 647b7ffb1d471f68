// comm/algorithms/recursive_doubling.cpp: all_reduce by recursive doubling.
//
// W = 4, rank r holding x_r. Round k: rank r exchanges its whole buffer with r XOR 2^k and both
// combine the two:
//   round 0   0<->1  2<->3       0,1 hold x0+x1       2,3 hold x2+x3
//   round 1   0<->2  1<->3       every rank holds (x0+x1)+(x2+x3)
// log2 W rounds of the whole buffer: few messages, each of n bytes, so it wins where a message's
// latency costs more than its bytes (small buffers) and loses to the ring's 2(W-1)/W n bytes for
// large ones. Any W: the ranks beyond the largest power of two fold in first and get the result
// at the end (pow2.h), two more rounds.
//
// Every rank computes its own result, so both partners must compute the same bits: each combines
// as op(lower virtual rank's value, higher one's), the same expression on both sides. Safety: each
// rank's result depends, round by round, on checked frames from every other rank (as the
// dissemination barrier), so no rank finishes unless all called the same collective.
#include "comm/algorithms/recursive_doubling.h"

#include <cstring>
#include <vector>

#include "comm/algorithms/pow2.h"
#include "core/error.h"

namespace engine::comm {

void rd_all_reduce(const CollContext& c, void* data) {
  const int W = c.world(), r = c.rank();
  if (W == 1) return;
  ENGINE_CHECK(data || c.fp.count == 0, "all_reduce: null buffer");
  auto* buf = static_cast<std::byte*>(data);
  const size_t n = c.fp.count, nbytes = n * dtype_size(c.fp.dtype);
  const Range all{0, n};
  const Pow2 P(W);
  const Deadline dl = c.deadline();
  const int v = P.vrank(r), folded = P.fold_partner(r), last = P.rounds() + 1;
  if (v < 0) {  // sits out: hands its buffer over, gets the result back
    exchange(c, buf, folded, 0, all, kNoRange, false, dl);
    observe_round(c, "rd", "fold", 0, folded, all, -1, {}, false, buf);
    exchange(c, buf, folded, last, kNoRange, all, false, dl);
    observe_round(c, "rd", "unfold", last, -1, {}, folded, all, false, buf);
    return;
  }
  if (folded >= 0) {
    exchange(c, buf, folded, 0, kNoRange, all, true, dl);
    observe_round(c, "rd", "fold", 0, -1, {}, folded, all, true, buf);
  }
  std::vector<std::byte> theirs(nbytes);
  for (int k = 0; k < P.rounds(); ++k) {
    const int pv = v ^ (1 << k), peer = P.real(pv);
    const uint32_t step = static_cast<uint32_t>(k + 1);
    FrameHeader h = FrameHeader::data(c.fp, step, nbytes);
    auto rv = c.tp.irecv(peer, Lane::Collective, h, theirs.data());
    auto sd = c.tp.isend(peer, Lane::Collective, h, buf);
    c.tp.wait(rv, dl);
    c.tp.wait(sd, dl);
    if (v < pv) {
      reduce_into(buf, theirs.data(), n, c.fp.dtype, c.fp.redop);
    } else {
      reduce_into(theirs.data(), buf, n, c.fp.dtype, c.fp.redop);
      if (nbytes) std::memcpy(buf, theirs.data(), nbytes);
    }
    observe_round(c, "rd", "exchange", k + 1, peer, all, peer, all, true, buf);
  }
  if (c.fp.redop == ReduceOp::Avg) divide_by(buf, n, c.fp.dtype, W);
  if (folded >= 0) {
    exchange(c, buf, folded, last, all, kNoRange, false, dl);
    observe_round(c, "rd", "unfold", last, folded, all, -1, {}, false, buf);
  }
}

}  // namespace engine::comm
