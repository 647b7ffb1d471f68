// comm/algorithms/tree.cpp: binomial trees for broadcast and reduce.
//
// Ranks are numbered from the root: v = (rank - root) mod W. Broadcast, W = 8:
//   round 0   0 -> 4
//   round 1   0 -> 2   4 -> 6
//   round 2   0 -> 1   2 -> 3   4 -> 5   6 -> 7
// Rank v's parent is v minus its lowest set bit; its children are v + m for the powers of two m
// below that bit (below the top for the root), sent to farthest first. In each round every rank
// that holds the data sends it once, so ceil(log2 W) rounds reach everyone. Reduce runs the tree
// backwards, nearest child first: round k, every v with lowest set bit 2^k sends its partial
// result to v - 2^k, which combines it (child by child, in a fixed order, so the result's bits
// never depend on timing). The buffer travels in segments (the chains' grain): a rank forwards
// segment s as soon as it has it (broadcast) or has combined it (reduce).
//
// These data flows do not make every rank hear from every other one, so both first run agree(), as
// the chains do (comm/algorithms/chain.cpp).
#include "comm/algorithms/tree.h"

#include <cstring>
#include <vector>

#include "comm/algorithms/direct.h"
#include "comm/algorithms/pow2.h"
#include "core/error.h"

namespace engine::comm {

namespace {

int lowbit(int v) {
  return v & -v;
}

// Highest power of two < W (the root's first child distance), or 0 for W = 1.
int top_child(int W) {
  int m = 1;
  while (m * 2 < W) m *= 2;
  return W > 1 ? m : 0;
}

int log2i(int m) {
  int k = 0;
  while ((1 << k) < m) ++k;
  return k;
}

struct Segments {
  size_t count, seg, n;
  Segments(const CollContext& c)
      : count(c.fp.count),
        seg(c.segment_count()),
        n(std::max<size_t>(1, (count + seg - 1) / seg)) {}
  Range at(size_t k) const {
    const size_t b = std::min(count, k * seg);
    return {b, std::min(count, b + seg)};
  }
};

// round0: the observer's number of the first round.
void broadcast_from(const CollContext& c, void* data, int root, int round0) {
  const int W = c.world(), r = c.rank();
  auto* buf = static_cast<std::byte*>(data);
  const int v = (r - root + W) % W, L = log2i(W);
  auto real = [&](int u) { return (u + root) % W; };
  const size_t es = dtype_size(c.fp.dtype);
  const Segments S(c);
  const Deadline dl = c.deadline();
  auto header = [&](size_t k) { return FrameHeader::data(c.fp, k, S.at(k).size() * es); };
  std::vector<RequestPtr> recvs(S.n), sends;
  const int parent = v ? real(v - lowbit(v)) : -1;
  if (v)
    for (size_t k = 0; k < S.n; ++k)
      recvs[k] = c.tp.irecv(parent, Lane::Collective, header(k), buf + S.at(k).begin * es);
  const int first = v ? lowbit(v) / 2 : top_child(W);
  for (size_t k = 0; k < S.n; ++k) {
    if (v) c.tp.wait(recvs[k], dl);
    for (int m = first; m >= 1; m /= 2)
      if (v + m < W)
        sends.push_back(
            c.tp.isend(real(v + m), Lane::Collective, header(k), buf + S.at(k).begin * es));
  }
  for (auto& s : sends) c.tp.wait(s, dl);
  const Range all{0, S.count};
  if (v)
    observe_round(c, "tree", "broadcast", round0 + L - 1 - log2i(lowbit(v)), -1, {}, parent, all,
                  false, buf);
  for (int m = first; m >= 1; m /= 2)
    if (v + m < W)
      observe_round(c, "tree", "broadcast", round0 + L - 1 - log2i(m), real(v + m), all, -1, {},
                    false, buf);
}

void reduce_to(const CollContext& c, void* data, int root) {
  const int W = c.world(), r = c.rank();
  const int v = (r - root + W) % W;
  auto real = [&](int u) { return (u + root) % W; };
  const size_t es = dtype_size(c.fp.dtype);
  const Segments S(c);
  const Deadline dl = c.deadline();
  auto header = [&](size_t k) { return FrameHeader::data(c.fp, k, S.at(k).size() * es); };
  std::vector<int> children;  // nearest first
  for (int m = 1; m < W && (v == 0 || m < lowbit(v)); m *= 2)
    if (v + m < W) children.push_back(m);
  // The root combines in place, a leaf sends its own buffer, the others combine in a copy.
  std::vector<std::byte> scratch;
  auto* acc = static_cast<std::byte*>(data);
  if (v != 0 && !children.empty()) {
    scratch.assign(acc, acc + S.count * es);
    acc = scratch.data();
  }
  const int parent = v ? real(v - lowbit(v)) : -1;
  std::vector<RequestPtr> sends;
  for (size_t k = 0; k < S.n; ++k) {
    std::byte* at = acc + S.at(k).begin * es;
    for (int m : children) {
      c.tp.wait(
          c.tp.irecv_reduce(real(v + m), Lane::Collective, header(k), at, c.fp.dtype, c.fp.redop),
          dl);
      if (k + 1 == S.n)
        observe_round(c, "tree", "reduce", log2i(m), -1, {}, real(v + m), {0, S.count}, true, acc);
    }
    if (v) sends.push_back(c.tp.isend(parent, Lane::Collective, header(k), at));
  }
  for (auto& s : sends) c.tp.wait(s, dl);
  if (v)
    observe_round(c, "tree", "reduce", log2i(lowbit(v)), parent, {0, S.count}, -1, {}, false, acc);
  if (v == 0 && c.fp.redop == ReduceOp::Avg) divide_by(data, S.count, c.fp.dtype, W);
}

}  // namespace

void tree_broadcast(const CollContext& c, void* data) {
  if (c.world() == 1) return;
  ENGINE_CHECK(data || c.fp.count == 0, "broadcast: null buffer");
  agree(c);
  broadcast_from(c, data, c.fp.root, 0);
}

void tree_reduce(const CollContext& c, void* data) {
  if (c.world() == 1) return;
  ENGINE_CHECK(data || c.fp.count == 0, "reduce: null buffer");
  agree(c);
  reduce_to(c, data, c.fp.root);
}

// No agree(): rank 0's result depends on checked frames from every rank, and every rank's final
// buffer on rank 0's frames, so no rank finishes unless all called the same collective.
void tree_all_reduce(const CollContext& c, void* data) {
  if (c.world() == 1) return;
  ENGINE_CHECK(data || c.fp.count == 0, "all_reduce: null buffer");
  reduce_to(c, data, 0);
  broadcast_from(c, data, 0, log2i(c.world()));
}

}  // namespace engine::comm
