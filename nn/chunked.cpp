// nn/chunked.cpp: see chunked.h.
#include "nn/chunked.h"

#include "core/error.h"

namespace engine::nn {
namespace {

thread_local ChunkedGradients* g_current = nullptr;

}  // namespace

ChunkedGradients::ChunkedGradients(const ChunkPlan& plan) : plan_(plan), previous_(g_current) {
  ENGINE_CHECK(plan.chunk_size > 0 && plan.global_batch > 0,
               "chunked gradients: a plan of chunks of ", plan.chunk_size, " in a batch of ",
               plan.global_batch);
  chunks_ = chunk_tree::chunk_count(static_cast<size_t>(plan.global_batch),
                                    static_cast<size_t>(plan.chunk_size));
  ENGINE_CHECK(plan.first_chunk >= 0 && static_cast<size_t>(plan.first_chunk) < chunks_,
               "chunked gradients: first chunk ", plan.first_chunk, " of ", chunks_, " chunks");
  g_current = this;
}

ChunkedGradients::~ChunkedGradients() {
  g_current = previous_;
}

ChunkedGradients* ChunkedGradients::current() {
  return g_current;
}

std::vector<LocalChunk> ChunkedGradients::local_chunks(const char* op, int64_t rows) const {
  const auto batch = static_cast<size_t>(plan_.global_batch);
  const auto size = static_cast<size_t>(plan_.chunk_size);
  std::vector<LocalChunk> out;
  int64_t done = 0;
  for (size_t c = static_cast<size_t>(plan_.first_chunk); done < rows && c < chunks_; ++c) {
    const chunk_tree::Range r = chunk_tree::chunk_samples(batch, size, c);
    out.push_back({c, done, static_cast<int64_t>(r.size())});
    done += static_cast<int64_t>(r.size());
  }
  ENGINE_CHECK(done == rows, op, ": a share of ", rows, " samples from chunk ", plan_.first_chunk,
               " is not whole chunks of ", plan_.chunk_size, " of a batch of ", plan_.global_batch);
  return out;
}

ChunkedGradients::Acc& ChunkedGradients::acc(const void* key) {
  auto it = accs_.find(key);
  if (it == accs_.end()) it = accs_.emplace(key, Acc(chunks_, AddInto{})).first;
  return it->second;
}

void ChunkedGradients::push(const Tensor& param, size_t global, Tensor partial) {
  acc(param.raw_data()).push(global, std::move(partial));
}

void ChunkedGradients::push_loss(size_t global, Tensor partial) {
  acc(this).push(global, std::move(partial));
}

TreeNodes ChunkedGradients::take(const void* key, const char* name) {
  auto it = accs_.find(key);
  ENGINE_CHECK(it != accs_.end(), "chunked gradients: no chunk partials for the ", name,
               " (did backward run inside the scope?)");
  TreeNodes nodes = it->second.take();
  accs_.erase(it);
  return nodes;
}

TreeNodes ChunkedGradients::take(const Tensor& param, const char* name) {
  return take(param.raw_data(), name);
}

TreeNodes ChunkedGradients::take_loss() {
  return take(this, "loss");
}

namespace {
struct AddDoubles {
  void operator()(std::vector<double>& a, const std::vector<double>& b) const {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
};
}  // namespace

std::vector<double> ChunkedGradients::sum_over_batch(
    const char* op, int64_t rows, size_t width,
    const std::function<void(const LocalChunk& chunk, double* out)>& sums) const {
  chunk_tree::Accumulator<std::vector<double>, AddDoubles> acc(chunks_, AddDoubles{});
  for (const LocalChunk& c : local_chunks(op, rows)) {
    std::vector<double> s(width, 0.0);
    sums(c, s.data());
    acc.push(c.global, std::move(s));
  }
  if (tree_sum_) return tree_sum_(chunks_, acc.take());
  return chunk_tree::fold(chunks_, acc.take(), AddDoubles{});
}

}  // namespace engine::nn
