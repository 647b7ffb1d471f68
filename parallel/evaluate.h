// parallel/evaluate.h: a model's mean loss and accuracy on a test split, over every rank: each
// rank evaluates its 1/W slice without autograd and the sums meet in one all_reduce. In the
// world-invariant mode the split is cut into chunks of kEvalChunk images, rank r takes whole
// chunks (chunk_tree::rank_chunks) and the chunks' loss sums meet in the fixed chunk tree (the
// counts are integers: any order sums them exactly), so the loss has the same bits at every
// world size up to the number of chunks.
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "core/device.h"
#include "data/mnist.h"
#include "nn/models.h"

namespace engine::parallel {

struct TestResult {
  int64_t count = 0, correct = 0;
  double loss = 0, accuracy = 0;  // the mean loss; correct / count
};

constexpr int64_t kEvalChunk = 10;  // divides the 1000 images of one forward

// Every rank calls it (comm: null for one process); every rank gets the whole split's result.
// world_invariant: the chunked evaluation above (throws engine::Error when the split has fewer
// chunks than ranks).
TestResult evaluate(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm,
                    Device dev, bool world_invariant = false);

}  // namespace engine::parallel
