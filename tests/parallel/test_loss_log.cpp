// tests/parallel/test_loss_log.cpp: the device loss log (parallel/loss_log.h): sums in step order
// in double, reads only what is new, grows past its first buffer, carries a resumed sum.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "parallel/loss_log.h"

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

}  // namespace
}  // namespace engine::parallel
