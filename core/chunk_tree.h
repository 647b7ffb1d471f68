// core/chunk_tree.h: the fixed reduction tree over the chunks of a global batch, so that a sum
// over the batch has the same bits at every world size. A batch of B samples is cut into n
// chunks; rank r of W takes a contiguous run of whole chunks; each chunk's partial sum is a leaf,
// and the leaves are combined in one tree that depends on n alone, never on W or on which rank
// holds which chunk. IEEE addition commutes bit for bit (a + b == b + a) but does not associate:
// only the tree's shape decides the bits, so the shape is fixed here, once, for every layer.
//
// The tree: the implicit binary tree over the next power of two P >= n. Node (level, index)
// covers leaves [index << level, (index + 1) << level) clipped to [0, n); its value is left + right
// (left child += right child), or its left child's value when the right half is empty (n = 6:
// node (1, 3) covers nothing, so (2, 1) = (1, 2) and the root (3, 0) = (2, 0) + (2, 1)).
//
//   level 3                 (3,0) [0,6)
//   level 2        (2,0) [0,4)          (2,1) [4,6)
//   level 1   (1,0)      (1,1)     (1,2)     (1,3) empty
//   level 0  0    1     2    3    4    5
//
// A rank folds the leaves it holds as far as it can (Accumulator: siblings merge as soon as both
// are there), leaving the maximal aligned nodes of its range (cover()); whoever combines the
// ranks' nodes finishes the same tree (fold()). Header-only index math and templates, generic
// over the buffer type and its addition, so kernels, nn, comm and parallel can all use it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace engine::chunk_tree {

// A half-open range [begin, end) of chunks, leaves or samples.
struct Range {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Range&) const = default;
};

// Part i of `total` items cut into `parts` contiguous parts whose sizes differ by at most one
// (the first total % parts parts hold one more).
inline Range even_split(size_t total, size_t parts, size_t i) {
  ENGINE_CHECK(parts > 0 && i < parts, "chunk_tree: part ", i, " of ", parts, " parts");
  const size_t base = total / parts, extra = total % parts;
  const size_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

// The chunks [first, last) that rank `rank` of `world` takes of `chunks`: contiguous, whole
// chunks, sizes differing by at most one; every rank takes at least one (world <= chunks).
inline Range rank_chunks(size_t chunks, int world, int rank) {
  ENGINE_CHECK(world >= 1 && static_cast<size_t>(world) <= chunks, "chunk_tree: a world of ", world,
               " ranks cannot take whole chunks of ", chunks, " (it needs 1 <= world <= chunks)");
  ENGINE_CHECK(rank >= 0 && rank < world, "chunk_tree: rank ", rank, " is not a rank of ", world);
  return even_split(chunks, static_cast<size_t>(world), static_cast<size_t>(rank));
}

// Chunks of chunk_size samples in a batch of `batch` (the last one may be shorter).
inline size_t chunk_count(size_t batch, size_t chunk_size) {
  ENGINE_CHECK(chunk_size > 0, "chunk_tree: chunks of 0 samples");
  return (batch + chunk_size - 1) / chunk_size;
}

// The samples of chunk `chunk` in the batch: [chunk * chunk_size, ...), clipped to the batch.
inline Range chunk_samples(size_t batch, size_t chunk_size, size_t chunk) {
  ENGINE_CHECK(chunk < chunk_count(batch, chunk_size), "chunk_tree: chunk ", chunk,
               " of a batch of ", batch, " in chunks of ", chunk_size);
  const size_t begin = chunk * chunk_size;
  return {begin, std::min(batch, begin + chunk_size)};
}

// A node of the tree: leaves [index << level, (index + 1) << level) clipped to [0, n).
struct Node {
  int level = 0;
  size_t index = 0;
  bool operator==(const Node&) const = default;
  auto operator<=>(const Node&) const = default;
  std::string str()
      const {  // "(2, 1)"; appended piecewise (GCC 12's -Wrestrict misfires on "(" + s)
    std::string s(1, '(');
    s += std::to_string(level);
    s += ", ";
    s += std::to_string(index);
    s += ')';
    return s;
  }
};

// The root's level: ceil(log2 n) (0 for one leaf).
inline int root_level(size_t n) {
  ENGINE_CHECK(n > 0, "chunk_tree: a tree of 0 leaves");
  int l = 0;
  while ((size_t{1} << l) < n) ++l;
  return l;
}

inline Node root(size_t n) {
  return {root_level(n), 0};
}

// The leaves node covers in a tree of n leaves (empty when it lies past n).
inline Range leaves(Node node, size_t n) {
  const size_t begin = node.index << node.level;
  if (begin >= n) return {n, n};
  return {begin, std::min(n, (node.index + 1) << node.level)};
}

// Whether node is a node of the tree of n leaves that covers at least one leaf.
inline bool valid(Node node, size_t n) {
  return node.level >= 0 && node.level <= root_level(n) &&
         (node.index >> (root_level(n) - node.level)) == 0 && !leaves(node, n).empty();
}

// The maximal aligned nodes covering [r.begin, r.end), in leaf order: at each position the
// highest node that starts there and ends by r.end (a node equal to its left child is taken as
// the higher one: [4, 6) of n = 6 is (2, 1)). What an Accumulator fed r leaves behind.
inline std::vector<Node> cover(size_t n, Range r) {
  ENGINE_CHECK(r.begin <= r.end && r.end <= n, "chunk_tree: leaves [", r.begin, ", ", r.end,
               ") are not a range of ", n, " leaves");
  std::vector<Node> out;
  const int top = r.empty() ? 0 : root_level(n);
  for (size_t pos = r.begin; pos < r.end;) {
    int l = 0;
    while (l < top && pos % (size_t{2} << l) == 0 && std::min(n, pos + (size_t{2} << l)) <= r.end)
      ++l;
    out.push_back({l, pos >> l});
    pos = std::min(n, pos + (size_t{1} << l));
  }
  return out;
}

// Pushes leaf partials in increasing leaf order, from any first leaf, and merges siblings as soon
// as both are there (left += right), promoting a node whose right half is empty; nodes() then
// holds the maximal aligned nodes of the leaves pushed (cover()). Add: add(Buf& a, const Buf& b)
// adds b into a, element by element.
template <class Buf, class Add>
class Accumulator {
 public:
  Accumulator(size_t n, Add add) : n_(n), top_(root_level(n)), add_(std::move(add)) {}

  void push(size_t leaf, Buf partial) {
    ENGINE_CHECK(leaf < n_, "chunk_tree: leaf ", leaf, " of a tree of ", n_, " leaves");
    ENGINE_CHECK(stack_.empty() || leaf == next_, "chunk_tree: leaf ", leaf, " pushed where leaf ",
                 next_, " was next (leaves go in increasing order, no gaps)");
    next_ = leaf + 1;
    stack_.emplace_back(Node{0, leaf}, std::move(partial));
    settle();
  }

  // The nodes held, in leaf order (each with its partial).
  const std::vector<std::pair<Node, Buf>>& nodes() const { return stack_; }
  std::vector<std::pair<Node, Buf>> take() { return std::move(stack_); }

 private:
  void settle() {
    while (stack_.back().first.level < top_) {
      Node& t = stack_.back().first;
      const Node parent{t.level + 1, t.index / 2};
      if (t.index % 2 == 0) {
        if (leaves(Node{t.level, t.index + 1}, n_).empty()) {
          t = parent;  // right half empty: the parent is its left child
          continue;
        }
        return;
      }
      if (stack_.size() < 2 || stack_[stack_.size() - 2].first != Node{t.level, t.index - 1})
        return;
      auto right = std::move(stack_.back());
      stack_.pop_back();
      add_(stack_.back().second, right.second);
      stack_.back().first = parent;
    }
  }

  size_t n_;
  int top_;
  Add add_;
  size_t next_ = 0;
  std::vector<std::pair<Node, Buf>> stack_;
};

// Combines disjoint nodes that together cover [0, n) into the root, in the tree's order: the
// same bits whichever ranks made which nodes. The partials are consumed (the result is built in
// the buffer of the leftmost node). Throws engine::Error naming a node that overlaps another
// or a leaf that no node covers.
template <class Buf, class Add>
Buf fold(size_t n, std::vector<std::pair<Node, Buf>> nodes, Add&& add) {
  std::map<Node, size_t> at;
  for (size_t i = 0; i < nodes.size(); ++i) {
    ENGINE_CHECK(valid(nodes[i].first, n), "chunk_tree: ", nodes[i].first.str(),
                 " is not a node of a tree of ", n, " leaves");
    ENGINE_CHECK(at.emplace(nodes[i].first, i).second, "chunk_tree: node ", nodes[i].first.str(),
                 " given twice");
  }
  std::vector<bool> used(nodes.size(), false);
  // Node value, top down; a node given is taken as it is (its subtree is the giver's).
  auto value = [&](auto& self, Node node) -> Buf {
    if (auto it = at.find(node); it != at.end()) {
      used[it->second] = true;
      return std::move(nodes[it->second].second);
    }
    const Range lv = leaves(node, n);
    ENGINE_CHECK(node.level > 0, "chunk_tree: no node covers leaf ", lv.begin, " of ", n);
    const Node left{node.level - 1, node.index * 2}, right{node.level - 1, node.index * 2 + 1};
    Buf a = self(self, left);
    if (!leaves(right, n).empty()) {
      Buf b = self(self, right);
      add(a, b);
    }
    return a;
  };
  Buf out = value(value, root(n));
  for (size_t i = 0; i < nodes.size(); ++i)
    ENGINE_CHECK(used[i], "chunk_tree: node ", nodes[i].first.str(), " (leaves ",
                 leaves(nodes[i].first, n).begin, "..", leaves(nodes[i].first, n).end - 1,
                 ") overlaps another node");
  return out;
}

}  // namespace engine::chunk_tree
