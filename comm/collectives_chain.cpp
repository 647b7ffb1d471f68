// comm/collectives_chain.cpp: broadcast and reduce as pipelined chains.
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
#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace engine::comm {

namespace {

struct Segments {
  size_t count, seg, n;
  Segments(size_t count_, size_t seg_) : count(count_), seg(seg_) {
    n = std::max<size_t>(1, (count + seg - 1) / seg);
  }
  Range operator[](size_t k) const {
    size_t b = std::min(count, k * seg);
    return {b, std::min(count, b + seg)};
  }
};

}  // namespace

void Communicator::do_broadcast(void* data, size_t count, DType dt, int root) {
  Fingerprint fp = begin(CollOp::Broadcast, count, dt, ReduceOp::SUM, root);
  const int W = size();
  if (W == 1) return;
  ENGINE_CHECK(data || count == 0, "broadcast: null buffer");
  agree(fp);
  const int v = (rank() - root + W) % W;  // position in the chain
  const int prev = (rank() - 1 + W) % W, next = (rank() + 1) % W;
  const size_t es = dtype_size(dt);
  const Segments segs(count, segment_count(dt));
  auto* buf = static_cast<std::byte*>(data);
  Transport& tp = *transport_;
  const Deadline dl = deadline();

  std::vector<RequestPtr> recvs(segs.n), sends;
  if (v > 0)
    for (size_t k = 0; k < segs.n; ++k) {
      Range r = segs[k];
      recvs[k] =
          tp.irecv(prev, Stream::Coll, FrameHeader::data(fp, k, r.size() * es), buf + r.begin * es);
    }
  for (size_t k = 0; k < segs.n; ++k) {
    if (v > 0) tp.wait(recvs[k], dl);
    if (v < W - 1) {
      Range r = segs[k];
      sends.push_back(tp.isend(next, Stream::Coll, FrameHeader::data(fp, k, r.size() * es),
                               buf + r.begin * es));
    }
  }
  for (auto& s : sends) tp.wait(s, dl);
}

void Communicator::do_reduce(void* data, size_t count, DType dt, ReduceOp op, int root) {
  Fingerprint fp = begin(CollOp::Reduce, count, dt, op, root);
  const int W = size();
  if (W == 1) return;
  ENGINE_CHECK(data || count == 0, "reduce: null buffer");
  agree(fp);
  const int v = (rank() - root + W) % W;
  const int from = (rank() + 1) % W, to = (rank() - 1 + W) % W;  // the chain runs v+1 -> v
  const size_t es = dtype_size(dt);
  const Segments segs(count, segment_count(dt));
  Transport& tp = *transport_;
  const Deadline dl = deadline();

  // The root accumulates in place; the chain's tail sends its own buffer; the others accumulate in
  // a scratch copy so that their buffer stays unchanged.
  std::vector<std::byte> scratch;
  auto* acc = static_cast<std::byte*>(data);
  if (v > 0 && v < W - 1) {
    scratch.assign(acc, acc + count * es);
    acc = scratch.data();
  }
  std::vector<RequestPtr> recvs(segs.n), sends;
  if (v < W - 1)
    for (size_t k = 0; k < segs.n; ++k) {
      Range r = segs[k];
      recvs[k] = tp.irecv_reduce(from, Stream::Coll, FrameHeader::data(fp, k, r.size() * es),
                                 acc + r.begin * es, dt, op);
    }
  for (size_t k = 0; k < segs.n; ++k) {
    if (v < W - 1) tp.wait(recvs[k], dl);
    if (v > 0) {
      Range r = segs[k];
      sends.push_back(
          tp.isend(to, Stream::Coll, FrameHeader::data(fp, k, r.size() * es), acc + r.begin * es));
    }
  }
  for (auto& s : sends) tp.wait(s, dl);
  if (v == 0 && op == ReduceOp::AVG) divide_by(data, count, dt, W);
}

}  // namespace engine::comm
