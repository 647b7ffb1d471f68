// tests/core/test_chunk_tree.cpp: the fixed reduction tree over chunks (core/chunk_tree.h) - the
// split of chunks over ranks, the cover of a leaf range, the streaming accumulator and the fold,
// checked structurally (buffers that record the shape of the sum) and on floats whose bits
// depend on the association.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/chunk_tree.h"

namespace engine::chunk_tree {
namespace {

// Buffers that record how they were added: "((0+1)+2)". Equal strings, equal association.
const auto kConcat = [](std::string& a, const std::string& b) { a = "(" + a + "+" + b + ")"; };
using ExprAcc = Accumulator<std::string, decltype(kConcat)>;

// The tree's definition, written out: a node is left + right, or its left child where the right
// half is empty.
std::string expr(Node node, size_t n) {
  if (node.level == 0) return std::to_string(node.index);
  const Node left{node.level - 1, node.index * 2}, right{node.level - 1, node.index * 2 + 1};
  if (leaves(right, n).empty()) return expr(left, n);
  return "(" + expr(left, n) + "+" + expr(right, n) + ")";
}

// What one rank holding [r.begin, r.end) leaves after pushing every leaf of it.
std::vector<std::pair<Node, std::string>> accumulate(size_t n, Range r) {
  ExprAcc acc(n, kConcat);
  for (size_t j = r.begin; j < r.end; ++j) acc.push(j, std::to_string(j));
  return acc.take();
}

TEST(ChunkTree, RankSplitIsContiguousWholeAndEven) {
  for (size_t n : {size_t(6), size_t(7), size_t(8)})
    for (int W = 1; W <= static_cast<int>(n); ++W) {
      size_t next = 0, lo = n, hi = 0;
      for (int r = 0; r < W; ++r) {
        const Range c = rank_chunks(n, W, r);
        EXPECT_EQ(c.begin, next) << "n=" << n << " W=" << W << " r=" << r;
        next = c.end;
        lo = std::min(lo, c.size());
        hi = std::max(hi, c.size());
      }
      EXPECT_EQ(next, n);
      EXPECT_GE(lo, 1u);
      EXPECT_LE(hi - lo, 1u);
    }
  EXPECT_EQ(rank_chunks(8, 3, 0), (Range{0, 3}));  // the first n % W ranks take one more
  EXPECT_EQ(rank_chunks(8, 3, 2), (Range{6, 8}));
  EXPECT_THROW(rank_chunks(6, 7, 0), Error);
  EXPECT_THROW(rank_chunks(6, 2, 2), Error);
}

TEST(ChunkTree, ChunkSamples) {
  EXPECT_EQ(chunk_count(128, 16), 8u);
  EXPECT_EQ(chunk_count(96, 16), 6u);
  EXPECT_EQ(chunk_count(100, 16), 7u);
  EXPECT_EQ(chunk_samples(96, 16, 5), (Range{80, 96}));
  EXPECT_EQ(chunk_samples(100, 16, 6), (Range{96, 100}));
  EXPECT_THROW(chunk_samples(96, 16, 6), Error);
  EXPECT_EQ(even_split(2, 5, 1), (Range{1, 2}));  // fewer items than parts: some parts empty
  EXPECT_TRUE(even_split(2, 5, 3).empty());
}

TEST(ChunkTree, NodesAndLeaves) {
  EXPECT_EQ(root_level(1), 0);
  EXPECT_EQ(root_level(6), 3);
  EXPECT_EQ(root_level(8), 3);
  EXPECT_EQ(leaves({2, 1}, 6), (Range{4, 6}));
  EXPECT_TRUE(leaves({1, 3}, 6).empty());
  EXPECT_FALSE(valid({1, 3}, 6));
  EXPECT_FALSE(valid({4, 0}, 8));
  EXPECT_TRUE(valid({3, 0}, 6));
}

// For every n up to 17 and every range: the cover tiles the range in order, each node is maximal
// (its parent reaches outside the range), and the accumulator leaves exactly those nodes, each
// holding its leaves added in the tree's shape.
TEST(ChunkTree, AccumulatorLeavesTheCover) {
  for (size_t n = 1; n <= 17; ++n)
    for (size_t a = 0; a <= n; ++a)
      for (size_t b = a; b <= n; ++b) {
        const auto nodes = cover(n, {a, b});
        const auto held = accumulate(n, {a, b});
        ASSERT_EQ(held.size(), nodes.size()) << "n=" << n << " [" << a << "," << b << ")";
        size_t pos = a;
        for (size_t k = 0; k < nodes.size(); ++k) {
          const Range lv = leaves(nodes[k], n);
          EXPECT_EQ(lv.begin, pos);
          pos = lv.end;
          const Node parent{nodes[k].level + 1, nodes[k].index / 2};
          if (nodes[k].level < root_level(n)) {
            const Range pl = leaves(parent, n);
            EXPECT_TRUE(pl.begin < a || pl.end > b) << parent.str() << " fits: not maximal";
          }
          EXPECT_EQ(held[k].first, nodes[k]);
          EXPECT_EQ(held[k].second, expr(nodes[k], n)) << "node " << nodes[k].str();
        }
        EXPECT_EQ(pos, b);
      }
  // n = 6: [4, 6) is (2, 1), whose right half is empty; all of [0, 6) is the root.
  EXPECT_EQ(cover(6, {4, 6}), (std::vector<Node>{{2, 1}}));
  EXPECT_EQ(cover(6, {0, 6}), (std::vector<Node>{{3, 0}}));
  EXPECT_EQ(cover(8, {3, 6}), (std::vector<Node>{{0, 3}, {1, 2}}));
}

// The shape itself: n = 6 is ((0+1)+(2+3))+(4+5); n = 3 is (0+1)+2.
TEST(ChunkTree, CanonicalShape) {
  EXPECT_EQ(accumulate(6, {0, 6})[0].second, "(((0+1)+(2+3))+(4+5))");
  EXPECT_EQ(accumulate(3, {0, 3})[0].second, "((0+1)+2)");
  EXPECT_EQ(accumulate(1, {0, 1})[0].second, "0");
}

// Every split over W ranks folds to the one expression of a single process.
TEST(ChunkTree, FoldOfAnySplitIsTheSingleProcessTree) {
  for (size_t n = 1; n <= 17; ++n) {
    const std::string one = accumulate(n, {0, n})[0].second;
    EXPECT_EQ(one, expr(root(n), n));
    for (int W = 1; W <= static_cast<int>(n); ++W) {
      std::vector<std::pair<Node, std::string>> all;
      for (int r = W - 1; r >= 0; --r)  // the order of the list does not matter
        for (auto& p : accumulate(n, rank_chunks(n, W, r))) all.push_back(std::move(p));
      EXPECT_EQ(fold(n, std::move(all), kConcat), one) << "n=" << n << " W=" << W;
    }
  }
}

// Floats: leaf sums whose bits depend on the association, so a left-to-right sum differs.
TEST(ChunkTree, FloatBitsDependOnlyOnTheTree) {
  auto add = [](std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  };
  const size_t count = 64;
  for (size_t n : {size_t(6), size_t(8)}) {
    std::vector<std::vector<float>> leaf(n, std::vector<float>(count));
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < count; ++i)
        leaf[j][i] =
            std::ldexp(1.0f + float((j * 37 + i * 11) % 101) / 101.0f, int((j * 5 + i) % 13) - 6) *
            ((i + j) % 3 ? 1.0f : -1.0f);
    using Acc = Accumulator<std::vector<float>, decltype(add)>;
    auto held = [&](Range r) {
      Acc acc(n, add);
      for (size_t j = r.begin; j < r.end; ++j) acc.push(j, leaf[j]);
      return acc.take();
    };
    const std::vector<float> one = held({0, n})[0].second;
    std::vector<float> naive = leaf[0];
    for (size_t j = 1; j < n; ++j) add(naive, leaf[j]);
    EXPECT_NE(std::memcmp(naive.data(), one.data(), count * 4), 0)
        << "the data must tell the association apart, or this test could not fail";
    for (int W = 1; W <= static_cast<int>(n); ++W) {
      std::vector<std::pair<Node, std::vector<float>>> all;
      for (int r = 0; r < W; ++r)
        for (auto& p : held(rank_chunks(n, W, r))) all.push_back(std::move(p));
      const auto got = fold(n, std::move(all), add);
      EXPECT_EQ(std::memcmp(got.data(), one.data(), count * 4), 0) << "n=" << n << " W=" << W;
    }
  }
}

TEST(ChunkTree, RefusesBadNodesAndOrder) {
  auto nodes = [](std::vector<Node> v) {
    std::vector<std::pair<Node, std::string>> out;
    for (Node x : v) out.emplace_back(x, x.str());
    return out;
  };
  auto folds = [&](size_t n, std::vector<Node> v) {
    try {
      fold(n, nodes(std::move(v)), kConcat);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(folds(8, {{2, 0}, {1, 2}}).find("no node covers leaf 6"), std::string::npos);
  EXPECT_NE(folds(8, {{3, 0}, {0, 1}}).find("(0, 1)"), std::string::npos);
  EXPECT_NE(folds(6, {{2, 0}, {2, 1}, {1, 2}}).find("overlaps"), std::string::npos);
  EXPECT_NE(folds(6, {{1, 3}}).find("not a node"), std::string::npos);
  EXPECT_EQ(folds(6, {{2, 0}, {1, 2}}), "");  // (1, 2) stands for (2, 1): the same leaves
  ExprAcc acc(8, kConcat);
  acc.push(2, "2");
  EXPECT_THROW(acc.push(4, "4"), Error);
  EXPECT_THROW(acc.push(8, "8"), Error);
}

}  // namespace
}  // namespace engine::chunk_tree
