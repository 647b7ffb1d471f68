// tests/parallel/test_loss_log.cpp: the device loss log (parallel/loss_log.h): sums in step order
// in double, reads only what is new, grows past its first buffer, carries a resumed sum; the
// epoch's loss figures over ranks (mean, the gathered sums, a resumed epoch's sum).
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "parallel/loss_log.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

Tensor scalar(float v) {
  return Tensor::full({}, v, Device::cpu());
}

TEST(LossLog, ReadsWhatIsNewAndSumsInOrder) {
  LossLog log;
  log.start(0);
  log.record(scalar(0.5f));
  log.record(scalar(0.25f));
  EXPECT_EQ(log.unread(), 2);
  EXPECT_EQ(log.read(), (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(log.sum(), 0.75);
  EXPECT_EQ(log.last(), 0.25);
  EXPECT_TRUE(log.read().empty());
  log.record(scalar(1.f));
  EXPECT_EQ(log.read(), (std::vector<double>{1.0}));
  EXPECT_EQ(log.sum(), 1.75);
}

TEST(LossLog, GrowsPastItsFirstBufferKeepingTheUnread) {
  LossLog log;
  log.start(0);
  double want = 0;
  for (int i = 0; i < 700; ++i) {
    const float l = static_cast<float>(i % 17) / 4.f;
    log.record(scalar(l));
    want += l;
  }
  const std::vector<double> got = log.read();
  ASSERT_EQ(got.size(), 700u);
  EXPECT_EQ(got[699], static_cast<double>(699 % 17) / 4.0);
  EXPECT_EQ(log.sum(), want);
}

TEST(LossLog, StartCarriesAResumedSumAndRefusesAVector) {
  LossLog log;
  log.start(10);
  log.record(scalar(2.f));
  log.read();
  EXPECT_EQ(log.sum(), 12);
  EXPECT_THROW(log.record(Tensor::zeros({2}, DType::F32, Device::cpu())), Error);
}

TEST(EpochLoss, TheMeanOverRanksAndTheGatheredSums) {
  EXPECT_EQ(epoch_mean_loss(nullptr, 6.0, 4, false), 1.5);
  EXPECT_EQ(epoch_mean_loss(nullptr, 0.0, 0, false), 0.0);
  EXPECT_EQ(gather_loss_sums(nullptr, 2.5), std::vector<double>{2.5});
  auto comms = comm::make_mem_communicators(2);
  std::vector<double> mean(2), invariant(2);
  std::vector<std::vector<double>> gathered(2);
  testing::expect_no_errors(testing::run_threads(2, [&](int r) {
    mean[r] = epoch_mean_loss(comms[r].get(), r == 0 ? 3.0 : 5.0, r == 0 ? 2 : 2, false);
    invariant[r] = epoch_mean_loss(comms[r].get(), 6.0, 3, true);  // nothing travels
    gathered[r] = gather_loss_sums(comms[r].get(), r == 0 ? 0.1 : 0.2);
  }));
  EXPECT_EQ(mean, (std::vector<double>{2.0, 2.0}));  // (3 + 5) / (2 + 2)
  EXPECT_EQ(invariant, (std::vector<double>{2.0, 2.0}));
  EXPECT_EQ(gathered[0], (std::vector<double>{0.1, 0.2}));  // bit for bit, at rank 0
  EXPECT_TRUE(gathered[1].empty());
}

TEST(EpochLoss, AResumedEpochsSum) {
  const std::vector<double> sums{1.0, 2.0, 3.0};  // written by 3 ranks
  EXPECT_EQ(*resumed_loss_sum(sums, false, 3, 2), 3.0);
  EXPECT_EQ(resumed_loss_sum(sums, false, 2, 1), nullptr);  // another world: none for it
  EXPECT_EQ(*resumed_loss_sum(sums, true, 2, 1), 1.0);      // world-invariant: equal everywhere
  EXPECT_EQ(resumed_loss_sum({}, true, 2, 1), nullptr);
}

// Three members after a change: two kept a sum, the newcomer none; every rank gets their mean.
TEST(EpochLoss, TheMembersMeanStandsForEachRankAfterAChange) {
  auto comms = comm::make_mem_communicators(3);
  std::vector<std::vector<double>> got(3);
  testing::expect_no_errors(testing::run_threads(3, [&](int r) {
    got[r] = members_loss_sums(
        *comms[r], r == 2 ? std::vector<double>{} : std::vector<double>{r == 0 ? 4.0 : 6.0});
  }));
  for (const auto& g : got) EXPECT_EQ(g, (std::vector<double>{5.0, 5.0, 5.0}));
}

}  // namespace
}  // namespace engine::parallel
