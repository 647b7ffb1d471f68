// parallel/evaluate.cpp: see evaluate.h.
#include "parallel/evaluate.h"

#include <algorithm>

#include "core/autograd.h"
#include "data/batch.h"
#include "nn/functional.h"

namespace engine::parallel {

TestResult evaluate(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm,
                    Device dev) {
  NoGradGuard ng;
  model.eval();
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  const int64_t begin = test.count * rank / world, end = test.count * (rank + 1) / world;
  constexpr int64_t kChunk = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t b = begin; b < end; b += kChunk) {
    data::Batch batch = data::contiguous_batch(test, b, std::min(end, b + kChunk));
    Tensor labels = Tensor::from_vector_i64(batch.labels, {batch.size}, dev);
    Tensor images = Tensor::from_vector(batch.images, {batch.size, 1, batch.rows, batch.cols}, dev);
    Tensor scores = model.forward(images);
    loss_sum += model.loss(scores, labels).item() * static_cast<double>(batch.size);
    correct += nn::correct_count(scores, labels);
  }
  model.train();
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
