// comm/algorithms/chunk_tree.cpp: the fixed-tree all_reduce as a reduce-scatter into the owners
// of the slices, who fold in the tree's order, then an all-gather of the folded slices.
//
// The count elements are cut into W slices (sizes differing by at most one; count < W leaves some
// empty); rank s owns slice s. Four kinds of message between each pair of ranks, every receive
// posted as soon as its size is known:
//   1. step 0: the sender's nodes, as a bitmap over the tree's heap numbering (a size fixed by the
//      number of leaves, so no size has to travel first); every rank gets every bitmap, so every
//      rank checks that the nodes cover each leaf once, and all fail alike when they do not;
//   2. the sender's k node partials, cut to the receiver's slice (no packing);
//   3. the owner folds every rank's partials of its slice in the tree's order (core/chunk_tree.h
//      fold: the same bits for any W and any placement of the nodes), in place in out: the
//      partial of the node of leaf 0, where the fold ends, is received straight into it;
//   4. the owner's folded slice to every other rank.
// 2 to 4 go in segments of the communicator's pipelining grain: an owner folds and sends segment
// g while segment g + 1 is still arriving, as the ring overlaps its adds with its transfers.
// Why not the ring: a ring reduce-scatter adds partials as they pass, in an order set by W;
// here nothing is added on the way, only by the owner, in the tree's order. Why direct exchange
// for the all-gather too: it sends what the ring's all-gather sends, (W-1)/W of the buffer per
// rank, with one hop of latency instead of W-1 and no equal-slice padding. With one node per rank
// (n = W) a rank sends 2(W-1)/W of the buffer, as the ring; with k nodes, (k+1)(W-1)/W.
#include "comm/algorithms/chunk_tree.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"

namespace engine::comm {

namespace {

namespace ct = chunk_tree;

constexpr uint32_t kGatherStep = 0xFFFFFFFFu;

// The tree's nodes numbered as a heap: the root 1, node (l, i) 2^(L - l) + i, below 2P.
size_t heap_index(ct::Node node, int top) {
  return (size_t{1} << (top - node.level)) + node.index;
}
ct::Node heap_node(size_t h, int top) {
  int depth = 0;
  while ((h >> (depth + 1)) != 0) ++depth;
  return {top - depth, h - (size_t{1} << depth)};
}

struct Tree {
  size_t n;      // leaves
  int top;       // the root's level
  size_t words;  // uint64 words of a bitmap
  explicit Tree(size_t leaves)
      : n(leaves), top(ct::root_level(leaves)), words(((size_t{2} << top) + 63) / 64) {}
  std::vector<ct::Node> nodes_of(const std::vector<uint64_t>& bits) const {
    std::vector<ct::Node> v;
    for (size_t w = 0; w < bits.size(); ++w)
      for (uint64_t b = bits[w]; b; b &= b - 1)
        v.push_back(heap_node(w * 64 + static_cast<size_t>(__builtin_ctzll(b)), top));
    return v;
  }
};

std::string where(const CollContext& c) {
  return "chunk_tree_all_reduce on rank " + std::to_string(c.rank()) + " (" + c.fp.str() + ")";
}

// This rank's partials sorted by heap index (the order the bitmap lists them in) and its bitmap.
std::vector<TreePartial> sorted_parts(const CollContext& c, const Tree& t, const TreePartial* p,
                                      size_t np, std::vector<uint64_t>* bits) {
  std::vector<TreePartial> v(p, p + np);
  for (const auto& q : v) {
    ENGINE_CHECK(ct::valid(q.node, t.n), where(c), ": node ", q.node.str(),
                 " is not a node of a tree of ", t.n, " leaves");
    ENGINE_CHECK(q.data || c.fp.count == 0, where(c), ": node ", q.node.str(), " has no buffer");
  }
  std::sort(v.begin(), v.end(), [&](const TreePartial& a, const TreePartial& b) {
    return heap_index(a.node, t.top) < heap_index(b.node, t.top);
  });
  bits->assign(t.words, 0);
  for (const auto& q : v) {
    const size_t h = heap_index(q.node, t.top);
    ENGINE_CHECK(!((*bits)[h / 64] >> (h % 64) & 1), where(c), ": node ", q.node.str(),
                 " passed twice");
    (*bits)[h / 64] |= uint64_t{1} << (h % 64);
  }
  return v;
}

// Every leaf held by exactly one node of one rank; else the error names the leaf and rank(s).
void check_cover(const CollContext& c, const Tree& t,
                 const std::vector<std::vector<ct::Node>>& by) {
  std::vector<int> owner(t.n, -1);
  for (size_t q = 0; q < by.size(); ++q)
    for (const ct::Node& node : by[q]) {
      const ct::Range lv = ct::leaves(node, t.n);
      for (size_t j = lv.begin; j < lv.end; ++j) {
        ENGINE_CHECK(owner[j] < 0, where(c), ": leaf ", j, " is held by rank ", owner[j],
                     " and by rank ", q, " (node ", node.str(), ")");
        owner[j] = static_cast<int>(q);
      }
    }
  for (size_t j = 0; j < t.n; ++j)
    ENGINE_CHECK(owner[j] >= 0, where(c), ": no rank holds leaf ", j, " of ", t.n);
}

class TreeRun {
 public:
  TreeRun(const CollContext& c, const TreePartial* parts, size_t nparts, void* out)
      : c_(c),
        t_(static_cast<size_t>(c.fp.root)),
        W_(c.world()),
        r_(c.rank()),
        es_(dtype_size(c.fp.dtype)),
        seg_(c.segment_count()),
        out_(static_cast<std::byte*>(out)) {
    mine_ = sorted_parts(c, t_, parts, nparts, &bits_);
    for (int s = 0; s < W_; ++s)
      slices_.push_back(ct::even_split(c.fp.count, static_cast<size_t>(W_), s));
  }

  void run() {
    post_bitmaps_and_partials();
    receive_bitmaps();
    fold_and_send_segments();
    const Deadline dl = c_.deadline();
    for (auto& q : gather_recvs_) c_.tp.wait(q, dl);
    for (auto& q : sends_) c_.tp.wait(q, dl);
  }

 private:
  FrameHeader header(uint32_t step, size_t nbytes) const {
    return FrameHeader::data(c_.fp, step, nbytes);
  }
  // Slices travel in segments of seg_ elements, so that an owner folds and sends segment g while
  // segment g + 1 is still arriving: element range of segment g of slice s, and their number.
  size_t segments(int s) const { return (slices_[s].size() + seg_ - 1) / seg_; }
  ct::Range segment(int s, size_t g) const {
    const size_t b = slices_[s].begin + g * seg_;
    return {b, std::min(slices_[s].end, b + seg_)};
  }
  // Data message of node j (of k a sender holds) in segment g; the gathered segment g.
  static uint32_t data_step(size_t g, size_t k, size_t j) {
    return static_cast<uint32_t>(1 + g * k + j);
  }
  static uint32_t gather_step(size_t g) { return kGatherStep - static_cast<uint32_t>(g); }
  const std::byte* slice_of(const void* p) const {
    return static_cast<const std::byte*>(p) + slices_[r_].begin * es_;
  }

  // 1 and 2 of the file comment: this rank's bitmap and partials to every peer.
  void post_bitmaps_and_partials() {
    const size_t bb = t_.words * sizeof(uint64_t), k = mine_.size();
    peer_bits_.assign(W_, std::vector<uint64_t>(t_.words, 0));
    peer_bits_[r_] = bits_;
    for (int d = 1; d < W_; ++d) {
      const int p = (r_ - d + W_) % W_;
      bit_recvs_.push_back(c_.tp.irecv(p, Lane::Collective, header(0, bb), peer_bits_[p].data()));
    }
    for (int d = 1; d < W_; ++d) {
      const int p = (r_ + d) % W_;
      sends_.push_back(c_.tp.isend(p, Lane::Collective, header(0, bb), bits_.data()));
      for (size_t g = 0; g < segments(p); ++g)
        for (size_t j = 0; j < k; ++j) {
          const ct::Range e = segment(p, g);
          sends_.push_back(
              c_.tp.isend(p, Lane::Collective, header(data_step(g, k, j), e.size() * es_),
                          static_cast<const std::byte*>(mine_[j].data) + e.begin * es_));
        }
    }
  }

  // Each peer's bitmap; then, in the order the peer sends them, the receives of its partials of
  // this rank's slice (into the staging area, one row of the slice per node) and of its folded
  // slice (into out).
  void receive_bitmaps() {
    const Deadline dl = c_.deadline();
    for (auto& q : bit_recvs_) c_.tp.wait(q, dl);
    std::vector<std::vector<ct::Node>> by(W_);
    size_t total = 0;
    for (int q = 0; q < W_; ++q) {
      by[q] = t_.nodes_of(peer_bits_[q]);
      total += by[q].size();
    }
    check_cover(c_, t_, by);
    // The fold ends in the buffer of the node of leaf 0: its row is this rank's slice of out.
    const size_t row = slices_[r_].size() * es_;
    std::byte* own_slice = out_ + slices_[r_].begin * es_;
    staging_.resize((total - 1) * row);
    size_t spare = 0;
    auto row_of = [&](ct::Node node) {
      return ct::leaves(node, t_.n).begin == 0 ? own_slice : staging_.data() + row * spare++;
    };
    std::vector<size_t> first(W_ + 1, 0);  // rank q's nodes are staged_[first[q], first[q + 1])
    for (int q = 0; q < W_; ++q) {
      for (ct::Node node : by[q]) staged_.emplace_back(node, row_of(node));
      first[q + 1] = staged_.size();
    }
    // This rank's own partials before any receive into out is posted: out may be one of them.
    for (size_t j = 0; j < mine_.size(); ++j) {
      std::byte* at = staged_[first[r_] + j].second;
      if (row && at != slice_of(mine_[j].data)) std::memcpy(at, slice_of(mine_[j].data), row);
    }
    data_recvs_.resize(segments(r_));
    for (int q = 0; q < W_; ++q) {
      const size_t k = by[q].size();
      if (q == r_) continue;
      for (size_t g = 0; g < segments(r_); ++g)
        for (size_t j = 0; j < k; ++j)
          data_recvs_[g].push_back(c_.tp.irecv(
              q, Lane::Collective, header(data_step(g, k, j), segment(r_, g).size() * es_),
              staged_[first[q] + j].second + g * seg_ * es_));
    }
    for (int d = 1; d < W_; ++d) {
      const int p = (r_ - d + W_) % W_;
      for (size_t g = 0; g < segments(p); ++g) {
        const ct::Range e = segment(p, g);
        gather_recvs_.push_back(c_.tp.irecv(
            p, Lane::Collective, header(gather_step(g), e.size() * es_), out_ + e.begin * es_));
      }
    }
  }

  // 3 and 4: segment by segment, the fold of every node's partial in the tree's order into out,
  // and the result to every peer.
  void fold_and_send_segments() {
    const DType dt = c_.fp.dtype;
    for (size_t g = 0; g < segments(r_); ++g) {
      const Deadline dl = c_.deadline();
      for (auto& q : data_recvs_[g]) c_.tp.wait(q, dl);
      const ct::Range e = segment(r_, g);
      const size_t off = g * seg_ * es_, m = e.size();
      std::vector<std::pair<ct::Node, std::byte*>> nodes;
      for (const auto& [node, row] : staged_) nodes.emplace_back(node, row + off);
      std::byte* root = ct::fold(t_.n, std::move(nodes), [&](std::byte* a, std::byte* b) {
        reduce_into(a, b, m, dt, ReduceOp::Sum);
      });
      std::byte* dst = out_ + e.begin * es_;  // where the fold ends: the row of leaf 0's node
      if (root != dst) std::memcpy(dst, root, m * es_);
      for (int d = 1; d < W_; ++d)
        sends_.push_back(c_.tp.isend((r_ + d) % W_, Lane::Collective,
                                     header(gather_step(g), m * es_), out_ + e.begin * es_));
    }
  }

  const CollContext& c_;
  Tree t_;
  int W_, r_;
  size_t es_, seg_;
  std::byte* out_;
  std::vector<TreePartial> mine_;
  std::vector<uint64_t> bits_;
  std::vector<ct::Range> slices_;
  std::vector<std::vector<uint64_t>> peer_bits_;
  std::vector<std::byte> staging_;
  std::vector<std::pair<ct::Node, std::byte*>> staged_;  // every node's row of this slice
  std::vector<std::vector<RequestPtr>> data_recvs_;      // per segment of this rank's slice
  std::vector<RequestPtr> bit_recvs_, gather_recvs_, sends_;
};

}  // namespace

void chunk_tree_all_reduce(const CollContext& c, const TreePartial* parts, size_t nparts,
                           void* out) {
  ENGINE_CHECK(c.fp.root > 0, "chunk_tree_all_reduce: a tree of ", c.fp.root, " leaves");
  TreeRun(c, parts, nparts, out).run();
}

}  // namespace engine::comm
