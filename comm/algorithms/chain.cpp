// comm/algorithms/chain.cpp: broadcast and reduce as pipelined chains.
//
// broadcast, root 0, 4 ranks, buffer cut into segments s0 s1 s2 ...:
//   rank 0 -> rank 1 -> rank 2 -> rank 3        (ranks in ring order starting at the root)
//   time 0: 0 sends s0 to 1
//   time 1: 0 sends s1 to 1, 1 forwards s0 to 2
//   time 2: 0 sends s2 to 1, 1 forwards s1 to 2, 2 forwards s0 to 3 ...
// Every link carries the buffer once, so the time is about nbytes / bandwidth plus (W - 2)
// segment times: bandwidth-optimal for large buffers, where a tree would send each byte log W
// times from the root. reduce runs the same chain backwards, towards the root: each rank adds its
// own segment to the one arriving from behind and passes it on (non-root buffers stay unchanged;
// intermediate ranks accumulate in a scratch copy).
//
// These data flows do not make every rank hear from every other one, so both first run agree():
// a dissemination exchange of the fingerprint (ceil(log2 W) rounds, as the barrier) after which a
// rank knows that every rank called the same collective. A rank that disagrees fails, and its
// peers with it, before any data moves.
#include "comm/algorithms/chain.h"

#include <cstring>
#include <vector>

#include "comm/algorithms/direct.h"
#include "core/error.h"

namespace engine::comm {

namespace {

// One pass down a chain: receive segment k from `from` (into buf, or reduced into it), forward it
// to `to`; the chain's head only sends, its tail only receives.
struct Chain {
  int from, to;
  bool receives, sends;
  bool reduces;  // receives add into buf (reduce) instead of overwriting it (broadcast)
};

void run_chain(const CollContext& c, const Chain& ch, std::byte* buf) {
  const DType dt = c.fp.dtype;
  const size_t es = dtype_size(dt), count = c.fp.count, seg = c.segment_count();
  const size_t n = std::max<size_t>(1, (count + seg - 1) / seg);
  auto range = [&](size_t k) {
    size_t b = std::min(count, k * seg);
    return Range{b, std::min(count, b + seg)};
  };
  auto header = [&](size_t k) { return FrameHeader::data(c.fp, k, range(k).size() * es); };
  Transport& tp = c.tp;
  const Deadline dl = c.deadline();
  std::vector<RequestPtr> recvs(n), sends;
  if (ch.receives)
    for (size_t k = 0; k < n; ++k) {
      std::byte* dst = buf + range(k).begin * es;
      recvs[k] = ch.reduces
                     ? tp.irecv_reduce(ch.from, Lane::Collective, header(k), dst, dt, c.fp.redop)
                     : tp.irecv(ch.from, Lane::Collective, header(k), dst);
    }
  for (size_t k = 0; k < n; ++k) {
    if (ch.receives) tp.wait(recvs[k], dl);
    if (ch.sends)
      sends.push_back(tp.isend(ch.to, Lane::Collective, header(k), buf + range(k).begin * es));
  }
  for (auto& s : sends) tp.wait(s, dl);
}

}  // namespace

void chain_broadcast(const CollContext& c, void* data) {
  const int W = c.world(), r = c.rank();
  if (W == 1) return;
  ENGINE_CHECK(data || c.fp.count == 0, "broadcast: null buffer");
  agree(c);
  const int v = (r - c.fp.root + W) % W;  // position in the chain
  run_chain(c, {(r - 1 + W) % W, (r + 1) % W, v > 0, v < W - 1, false},
            static_cast<std::byte*>(data));
}

void chain_reduce(const CollContext& c, void* data) {
  const int W = c.world(), r = c.rank();
  if (W == 1) return;
  ENGINE_CHECK(data || c.fp.count == 0, "reduce: null buffer");
  agree(c);
  const int v = (r - c.fp.root + W) % W;  // the chain runs v+1 -> v
  // The root accumulates in place; the chain's tail sends its own buffer; the others accumulate in
  // a scratch copy so that their buffer stays unchanged.
  std::vector<std::byte> scratch;
  auto* acc = static_cast<std::byte*>(data);
  if (v > 0 && v < W - 1) {
    scratch.assign(acc, acc + c.fp.count * dtype_size(c.fp.dtype));
    acc = scratch.data();
  }
  run_chain(c, {(r + 1) % W, (r - 1 + W) % W, v<W - 1, v> 0, true}, acc);
  if (v == 0 && c.fp.redop == ReduceOp::Avg) divide_by(data, c.fp.count, c.fp.dtype, W);
}

}  // namespace engine::comm
