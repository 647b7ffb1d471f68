// comm/algorithms/pow2.h: any world size folded onto a power of two, as MPICH folds it for
// recursive doubling and Rabenseifner's algorithm. With p2 the largest power of two <= W and
// rem = W - p2, the first 2*rem ranks pair up before the algorithm: each even one (0, 2, ...) hands
// its whole buffer to the odd one after it, which combines it into its own and takes part as
// virtual rank r/2; the even ones sit out and receive the result at the end. The other ranks take
// part as virtual rank r - rem. W = 6: p2 = 4, rem = 2; ranks 0 and 2 fold into 1 and 3:
//   real     0   1   2   3   4   5
//   virtual  -   0   -   1   2   3
// Every exchange of the power-of-two algorithm is between virtual ranks v and v ^ d.
#pragma once
#include <cstddef>
#include <cstring>
#include <vector>

#include "comm/algorithms/context.h"

namespace engine::comm {

struct Pow2 {
  int world, p2, rem;
  explicit Pow2(int w) : world(w), p2(1), rem(0) {
    while (p2 * 2 <= w) p2 *= 2;
    rem = w - p2;
  }
  // This real rank's virtual rank, or -1 for a rank that sits out.
  int vrank(int r) const {
    if (r < 2 * rem) return r % 2 ? r / 2 : -1;
    return r - rem;
  }
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  // The partner a folded rank pairs with (r+1 for the even one, r-1 for the odd one), or -1.
  int fold_partner(int r) const {
    if (r >= 2 * rem) return -1;
    return r % 2 ? r - 1 : r + 1;
  }
  // log2(p2): the rounds of recursive doubling (and of each half of Rabenseifner's algorithm).
  int rounds() const {
    int k = 0;
    while ((1 << k) < p2) ++k;
    return k;
  }
};

// "No range": exchange() sends or receives nothing on that side.
inline constexpr Range kNoRange{static_cast<size_t>(-1), static_cast<size_t>(-1)};

// One exchange round: post a send of [sent) and a receive of [recvd) (reduced into the buffer when
// reduce), both with peer, message `step`; waits for both. The ranges must not overlap.
inline void exchange(const CollContext& c, std::byte* buf, int peer, uint32_t step, Range sent,
                     Range recvd, bool reduce, Deadline dl) {
  const size_t es = dtype_size(c.fp.dtype);
  Transport& tp = c.tp;
  RequestPtr rv;
  if (recvd.begin != kNoRange.begin) {
    FrameHeader h = FrameHeader::data(c.fp, step, recvd.size() * es);
    std::byte* dst = buf + recvd.begin * es;
    rv = reduce ? tp.irecv_reduce(peer, Lane::Collective, h, dst, c.fp.dtype, c.fp.redop)
                : tp.irecv(peer, Lane::Collective, h, dst);
  }
  RequestPtr sd;
  if (sent.begin != kNoRange.begin)
    sd = tp.isend(peer, Lane::Collective, FrameHeader::data(c.fp, step, sent.size() * es),
                  buf + sent.begin * es);
  if (rv) tp.wait(rv, dl);
  if (sd) tp.wait(sd, dl);
}

// Tells c.observer (if any) what this rank did in one round of the rd, rh or tree algorithms.
inline void observe_round(const CollContext& c, const char* algo, const char* phase, int round,
                          int send_to, Range sent, int recv_from, Range received, bool reduced,
                          const void* buf) {
  if (!c.observer) return;
  AlgoStepInfo s;
  s.rank = c.rank();
  s.world = c.world();
  s.algo = algo;
  s.phase = phase;
  s.round = round;
  s.send_to = send_to;
  s.sent = send_to >= 0 ? sent : Range{};
  s.recv_from = recv_from;
  s.received = recv_from >= 0 ? received : Range{};
  s.reduced = reduced;
  s.buffer = buf;
  s.count = c.fp.count;
  s.dtype = c.fp.dtype;
  c.observer->on_algo_step(s);
}

}  // namespace engine::comm
