// parallel/evaluate.cpp: see evaluate.h.
#include "parallel/evaluate.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/chunk_tree.h"
#include "core/error.h"
#include "data/batch.h"
#include "nn/functional.h"

namespace engine::parallel {
namespace {

struct Sum {
  int64_t correct = 0;
  double loss = 0;
};

// Images [begin, end) of the split through the model in one batch: their scores and labels.
struct Scored {
  Tensor scores, labels;
};
Scored score(nn::Model& model, const data::MnistSplit& test, int64_t begin, int64_t end,
             Device dev) {
  data::Batch batch = data::contiguous_batch(test, begin, end);
  Tensor labels = Tensor::from_vector_i64(batch.labels, {batch.size}, dev);
  Tensor images = Tensor::from_vector(batch.images, {batch.size, 1, batch.rows, batch.cols}, dev);
  return {model.forward(images), labels};
}

// The loss sum and the correct count of scored rows.
Sum sum_of(nn::Model& model, const Scored& s) {
  return {nn::correct_count(s.scores, s.labels),
          model.loss(s.scores, s.labels).item() * static_cast<double>(s.labels.size(0))};
}

// Rows [begin, begin + count) of s, as tensors of their own.
Scored rows(const Scored& s, int64_t begin, int64_t count) {
  const int64_t classes = s.scores.size(1);
  return {s.scores.flat_slice(begin * classes, count * classes).view({count, classes}).clone(),
          s.labels.flat_slice(begin, count).view({count}).clone()};
}

struct AddDouble {
  void operator()(double& a, const double& b) const { a += b; }
};

// The world-invariant evaluation: this rank's whole chunks, their loss sums in the chunk tree.
Sum chunked(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm, Device dev) {
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  const auto n = static_cast<size_t>(test.count), size = static_cast<size_t>(kEvalChunk);
  const size_t chunks = chunk_tree::chunk_count(n, size);
  ENGINE_CHECK(static_cast<size_t>(world) <= chunks,
               "world-invariant evaluation: ", test.images_path, " holds ", chunks, " chunks of ",
               kEvalChunk, " images, fewer than the ", world, " ranks");
  const chunk_tree::Range mine = chunk_tree::rank_chunks(chunks, world, rank);
  chunk_tree::Accumulator<double, AddDouble> acc(chunks, AddDouble{});
  Sum s;
  // Forward in batches of whole chunks (the fp32 forward is batch invariant: a row's scores do
  // not depend on its batch), each chunk's loss on its own rows.
  constexpr size_t kPerForward = 1000 / kEvalChunk;
  for (size_t c0 = mine.begin; c0 < mine.end; c0 += kPerForward) {
    const size_t c1 = std::min(mine.end, c0 + kPerForward);
    const auto first = static_cast<int64_t>(chunk_tree::chunk_samples(n, size, c0).begin);
    const Scored all =
        score(model, test, first,
              static_cast<int64_t>(chunk_tree::chunk_samples(n, size, c1 - 1).end), dev);
    for (size_t c = c0; c < c1; ++c) {
      const chunk_tree::Range r = chunk_tree::chunk_samples(n, size, c);
      const Sum one = sum_of(
          model, rows(all, static_cast<int64_t>(r.begin) - first, static_cast<int64_t>(r.size())));
      s.correct += one.correct;
      acc.push(c, one.loss);
    }
  }
  std::vector<std::pair<chunk_tree::Node, double>> nodes = acc.take();
  if (!comm) {
    s.loss = chunk_tree::fold(chunks, std::move(nodes), AddDouble{});
    return s;
  }
  std::vector<comm::TreePartial> parts;
  for (const auto& [node, v] : nodes) parts.push_back({node, &v});
  comm->chunk_tree_all_reduce(chunks, parts, &s.loss, 1, DType::F64);
  comm->all_reduce(&s.correct, 1, DType::I64, comm::ReduceOp::Sum);
  return s;
}

// The model in eval mode for the guard's life; back in its mode after, an error included (a rank
// lost during the evaluation: the job may go on training, parallel/elastic.h).
struct EvalMode {
  explicit EvalMode(nn::Model& m) : model(m), was(m.is_training()) { m.eval(); }
  ~EvalMode() { model.train(was); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;
  nn::Model& model;
  bool was;
};

}  // namespace

TestResult evaluate(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm,
                    Device dev, bool world_invariant) {
  NoGradGuard ng;
  EvalMode mode(model);
  if (world_invariant) {
    const Sum s = chunked(model, test, comm, dev);
    TestResult r;
    r.count = test.count;
    r.correct = s.correct;
    r.loss = test.count ? s.loss / static_cast<double>(test.count) : 0;
    r.accuracy = test.count ? static_cast<double>(s.correct) / static_cast<double>(test.count) : 0;
    return r;
  }
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  const int64_t begin = test.count * rank / world, end = test.count * (rank + 1) / world;
  constexpr int64_t kChunk = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t b = begin; b < end; b += kChunk) {
    const Sum one = sum_of(model, score(model, test, b, std::min(end, b + kChunk), dev));
    loss_sum += one.loss;
    correct += one.correct;
  }
  if (comm) {
    float l = static_cast<float>(loss_sum);
    comm->all_reduce(&l, 1, DType::F32, comm::ReduceOp::Sum);
    comm->all_reduce(&correct, 1, DType::I64, comm::ReduceOp::Sum);
    loss_sum = l;
  }
  TestResult r;
  r.count = test.count;
  r.correct = correct;
  r.loss = test.count ? loss_sum / static_cast<double>(test.count) : 0;
  r.accuracy = test.count ? static_cast<double>(correct) / static_cast<double>(test.count) : 0;
  return r;
}

}  // namespace engine::parallel
