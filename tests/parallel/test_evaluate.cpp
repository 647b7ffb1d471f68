// tests/parallel/test_evaluate.cpp: evaluation over ranks (parallel/evaluate.h): each rank's slice
// of the test split, summed in one all_reduce, gives every rank the one-process figures.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/evaluate.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

data::MnistSplit test_split(int64_t n) {
  data::MnistSplit s;
  s.count = n;
  s.rows = s.cols = 28;
  s.images.resize(static_cast<size_t>(n * 28 * 28));
  for (size_t i = 0; i < s.images.size(); ++i) s.images[i] = static_cast<uint8_t>(i * 31 % 251);
  for (int64_t i = 0; i < n; ++i) s.labels.push_back(static_cast<uint8_t>(i * 7 % 10));
  return s;
}

TEST(Evaluate, RanksTogetherGiveTheOneProcessFigures) {
  const data::MnistSplit split = test_split(1003);  // more than one chunk, not divisible by 3
  testing::SmallModel one;
  const TestResult want = evaluate(*one.model, split, nullptr, Device::cpu());
  EXPECT_EQ(want.count, 1003);
  EXPECT_GT(want.loss, 0);
  EXPECT_EQ(want.accuracy, static_cast<double>(want.correct) / 1003);
  constexpr int kWorld = 3;
  auto comms = comm::make_mem_communicators(kWorld);
  std::vector<TestResult> got(kWorld);
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    testing::SmallModel m;
    got[r] = evaluate(*m.model, split, comms[r].get(), Device::cpu());
  }));
  for (const TestResult& t : got) {
    EXPECT_EQ(t.count, want.count);
    EXPECT_EQ(t.correct, want.correct);
    EXPECT_NEAR(t.loss, want.loss, 1e-5 * want.loss);  // float sums of other slices
  }
}

// A rank lost during the evaluation (its peer aborted): the error reaches the caller and the model
// is back in training mode, so that a job that goes on without that rank trains with dropout.
TEST(Evaluate, AnErrorLeavesTheModelInItsMode) {
  const data::MnistSplit split = test_split(100);
  for (bool world_invariant : {false, true}) {
    auto comms = comm::make_mem_communicators(2);
    comms[1]->transport().abort("rank 1 is gone (a test)");
    testing::SmallModel m;
    ASSERT_TRUE(m.model->is_training());
    EXPECT_THROW(evaluate(*m.model, split, comms[0].get(), Device::cpu(), world_invariant), Error);
    EXPECT_TRUE(m.model->is_training()) << world_invariant;
  }
}

}  // namespace
}  // namespace engine::parallel
