// parallel/evaluate.h: a model's mean loss and accuracy on a test split, over every rank: each
// rank evaluates its 1/W slice without autograd and the sums meet in one all_reduce.
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

// Every rank calls it (comm: null for one process); every rank gets the whole split's result.
TestResult evaluate(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm,
                    Device dev);

}  // namespace engine::parallel
