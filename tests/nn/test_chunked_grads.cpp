// tests/nn/test_chunked_grads.cpp: the chunked-gradient mode (nn/chunked.h) gives every parameter
// and the loss the same bits at every world size. Each rank of W = 1..4 runs forward and backward
// on its share of one global batch (ranks as a loop, the thread count 1 or 2 by rank: the pool is
// the process's), its nodes are gathered and folded in the tree, and the roots compared with
// W = 1's. A control without the mode (each rank's mean gradient weighted by its share and summed,
// what a ring all-reduce of DDP adds up) differs. BatchNorm's statistics need the ranks together
// (tests/parallel/test_world_invariant.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/chunk_tree.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "nn/chunked.h"
#include "nn/functional.h"
#include "nn/models.h"

namespace engine {
namespace {

constexpr int64_t kChunk = 16;

struct Batch {
  Tensor x, y;
};

Batch make_batch(int64_t b) {
  Generator g(77);
  std::vector<float> x(static_cast<size_t>(b * 28 * 28));
  for (float& v : x) v = g.uniform(0.0f, 1.0f);
  std::vector<int64_t> y(static_cast<size_t>(b));
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>(g.uniform(0.0f, 10.0f)) % 10;
  return {Tensor::from_vector(x, {b, 1, 28, 28}), Tensor::from_vector_i64(y, {b})};
}

// Rows [begin, begin + count) of t (contiguous, first dimension) as a tensor of its own.
Tensor rows(const Tensor& t, int64_t begin, int64_t count) {
  const int64_t per = t.numel() / t.size(0);
  Shape s = t.shape();
  s[0] = count;
  return t.flat_slice(begin * per, count * per).view(s).clone();
}

// Every parameter's gradient (by name) and the loss sum, as plain floats.
using Result = std::map<std::string, std::vector<float>>;

struct AddInto {
  void operator()(Tensor& a, const Tensor& b) const { a.add_(b); }
};

// One step of `name` on batch at world size W: chunked (the folded tree roots) or the control.
Result step(const std::string& name, const Batch& batch, int world, bool chunked) {
  const auto b = batch.x.size(0);
  const size_t n = chunk_tree::chunk_count(static_cast<size_t>(b), kChunk);
  std::map<std::string, nn::TreeNodes> gathered;
  Result control;
  const int threads = num_threads();
  for (int r = 0; r < world; ++r) {
    set_num_threads(1 + r % 2);
    Generator init(5), drop(9);  // every rank: the same parameters and dropout stream
    auto m = nn::make_model(name, {}, init, drop);
    const chunk_tree::Range cr = chunk_tree::rank_chunks(n, world, r);
    const int64_t first = static_cast<int64_t>(cr.begin) * kChunk;
    const int64_t count = std::min(b, static_cast<int64_t>(cr.end) * kChunk) - first;
    const Tensor x = rows(batch.x, first, count), y = rows(batch.y, first, count);
    if (chunked) {
      nn::ChunkedGradients cg({kChunk, b, static_cast<int64_t>(cr.begin)});
      m->loss(m->forward(x), y).backward();
      for (const auto& [pname, p] : m->named_parameters())
        for (auto& node : cg.take(p, pname.c_str())) gathered[pname].push_back(std::move(node));
      for (auto& node : cg.take_loss()) gathered["loss"].push_back(std::move(node));
    } else {
      m->loss(m->forward(x), y).backward();
      for (const auto& [pname, p] : m->named_parameters()) {
        Tensor g = p.grad().clone();
        g.mul_(static_cast<float>(count) / static_cast<float>(b));
        auto& acc = control[pname];
        const std::vector<float> v = g.to_vector();
        if (acc.empty()) acc.assign(v.size(), 0.0f);
        for (size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
      }
    }
  }
  set_num_threads(threads);
  if (!chunked) return control;
  Result out;
  for (auto& [pname, nodes] : gathered)
    out[pname] = chunk_tree::fold(n, std::move(nodes), AddInto{}).to_vector();
  return out;
}

// The parameters (and the loss) whose bits differ from want's, with how many floats.
std::string differing(const Result& want, const Result& got) {
  std::string out;
  for (const auto& [pname, w] : want) {
    const std::vector<float>& g = got.at(pname);
    size_t diff = 0;
    for (size_t i = 0; i < w.size(); ++i) diff += std::memcmp(&w[i], &g[i], sizeof(float)) != 0;
    if (diff) out += pname + " (" + std::to_string(diff) + " of " + std::to_string(w.size()) + ") ";
  }
  return out;
}

void expect_world_invariant(const std::string& name, int64_t b) {
  const Batch batch = make_batch(b);
  const Result one = step(name, batch, 1, true);
  ASSERT_TRUE(one.count("loss"));
  for (int w = 2; w <= 4; ++w)
    EXPECT_EQ(differing(one, step(name, batch, w, true)), "")
        << name << " batch " << b << " W " << w;
}

// Without the mode some world size gives other bits (the test can fail).
void expect_control_differs(const std::string& name, int64_t b) {
  const Batch batch = make_batch(b);
  const Result one = step(name, batch, 1, false);
  std::string diffs;
  for (int w = 2; w <= 4; ++w) diffs += differing(one, step(name, batch, w, false));
  EXPECT_NE(diffs, "") << name;
}

TEST(ChunkedGrads, LinearSameBitsAtEveryWorldSize) {
  expect_world_invariant("linear", 96);
  expect_world_invariant("linear", 128);
}

TEST(ChunkedGrads, AShortLastChunk) {
  nn::ChunkedGradients cg({kChunk, 88, 4});  // 6 chunks, the last of 8 samples
  const std::vector<nn::LocalChunk> c = cg.local_chunks("test", 24);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].global, 4u);
  EXPECT_EQ(c[1].global, 5u);
  EXPECT_EQ(c[1].begin, 16);
  EXPECT_EQ(c[1].count, 8);
  EXPECT_THROW(cg.local_chunks("test", 16 + 16), Error);
  expect_world_invariant("linear", 88);
}

TEST(ChunkedGrads, BackwardOutsideTheScopeIsAnError) {
  Generator init(5), drop(9);
  auto m = nn::make_model("linear", {}, init, drop);
  const Batch batch = make_batch(16);
  Tensor loss;
  {
    nn::ChunkedGradients cg({kChunk, 16, 0});
    loss = m->loss(m->forward(batch.x), batch.y);
  }
  EXPECT_THROW(loss.backward(), Error);
}

TEST(ChunkedGrads, NetSameBitsAtEveryWorldSize) {
  expect_world_invariant("net", 96);
}

TEST(ChunkedGrads, SimpleCnnSameBitsAtEveryWorldSize) {
  expect_world_invariant("simplecnn", 96);
}

TEST(ChunkedGrads, WithoutTheModeTheBitsDiffer) {
  expect_control_differs("linear", 96);
  expect_control_differs("net", 96);
}

TEST(ChunkedGrads, RefusesAShareOfPartChunks) {
  const Batch batch = make_batch(32);
  Generator init(5), drop(9);
  auto m = nn::make_model("linear", {}, init, drop);
  nn::ChunkedGradients cg({kChunk, 96, 1});
  EXPECT_THROW(m->loss(m->forward(rows(batch.x, 0, 20)), rows(batch.y, 0, 20)).backward(), Error);
  // BatchNorm's statistics need every chunk: one process holding chunk 1 alone has no tree.
  auto conv = nn::make_model("convnet", {}, init, drop);
  EXPECT_THROW(conv->forward(rows(batch.x, 0, 16)), Error);
}

}  // namespace
}  // namespace engine
