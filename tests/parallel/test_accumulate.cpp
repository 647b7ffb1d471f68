// tests/parallel/test_accumulate.cpp: gradient accumulation (parallel/accumulate.h): the groups of
// an epoch and their scales, and K micro-batches stepping as one batch K times as large.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/accumulate.h"
#include "parallel/train_step.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

TEST(Accumulate, GroupsOfKAndAShortLastGroup) {
  std::vector<int> firsts, lasts;
  std::vector<float> scales;
  for (int64_t i = 0; i < 10; ++i) {
    const MicroBatch m = micro_batch(i, 10, 4);
    if (m.first) firsts.push_back(static_cast<int>(i));
    if (m.last) lasts.push_back(static_cast<int>(i));
    scales.push_back(m.scale);
  }
  EXPECT_EQ(firsts, (std::vector<int>{0, 4, 8}));
  EXPECT_EQ(lasts, (std::vector<int>{3, 7, 9}));
  EXPECT_EQ(scales[0], 0.25f);
  EXPECT_EQ(scales[9], 0.5f) << "the short group is its own mean";
  const MicroBatch one = micro_batch(5, 10, 1);
  EXPECT_TRUE(one.first && one.last);
  EXPECT_EQ(one.scale, 1.f);
}

// K micro-batches of 8 against one batch of 8K images, on one rank and over two.
TEST(Accumulate, KMicroBatchesEqualOneBigBatch) {
  constexpr int64_t kK = 4, kMicro = 8;
  for (int world : {1, 2}) {
    auto comms = comm::make_mem_communicators(world);
    std::vector<std::vector<float>> accumulated(world), whole(world);
    testing::expect_no_errors(testing::run_threads(world, [&](int r) {
      comm::Communicator* c = world > 1 ? comms[r].get() : nullptr;
      for (bool big : {false, true}) {
        testing::SmallModel m;
        OptimizerOptions o;
        auto opt = make_optimizer(o, m.model->named_parameters());
        TrainStep step(*m.model,
                       make_synchronisation(c, m.model->named_parameters(), {}, o, std::move(opt)),
                       NonfiniteMode::Stop, Device::cpu(), r, 0);
        const data::DeviceBatch all = testing::batch(r, 0, kK * kMicro);
        bool took = false;
        if (big) {
          step.run(all, MicroBatch{}, &took);
          whole[r] = testing::flat_params(*m.model);
          continue;
        }
        for (int64_t i = 0; i < kK; ++i) {
          data::DeviceBatch part;
          part.images = all.images.flat_slice(i * kMicro * 784, kMicro * 784)
                            .view({kMicro, 1, 28, 28})
                            .clone();
          part.labels = all.labels.flat_slice(i * kMicro, kMicro).clone();
          part.size = kMicro;
          step.run(part, micro_batch(i, kK, kK), &took);
          EXPECT_EQ(took, true);
          EXPECT_EQ(step.steps(), i + 1 == kK ? 1 : 0);
        }
        accumulated[r] = testing::flat_params(*m.model);
      }
    }));
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(accumulated[r].size(), whole[r].size());
      for (size_t i = 0; i < whole[r].size(); ++i)
        ASSERT_NEAR(accumulated[r][i], whole[r][i], 1e-6f) << "world " << world << " at " << i;
    }
  }
}

}  // namespace
}  // namespace engine::parallel
