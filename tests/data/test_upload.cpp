// tests/data/test_upload.cpp: BatchUploader hands out each staged batch unchanged, slot after
// slot, on the CPU and on a GPU (skipped with "no CUDA device" where none answers), and refuses
// batches that do not fit.
#include <gtest/gtest.h>

#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/upload.h"

namespace engine::data {
namespace {

Batch make_batch(int64_t size, int64_t seed) {
  Batch b;
  b.size = size;
  b.rows = 4;
  b.cols = 3;
  for (int64_t i = 0; i < size * 12; ++i) b.images.push_back(0.5f * static_cast<float>(i + seed));
  for (int64_t i = 0; i < size; ++i) b.labels.push_back((i * 7 + seed) % 10);
  return b;
}

class Upload : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceKind::CUDA && cuda_device_count() == 0)
      GTEST_SKIP() << cuda_unavailable_reason();
  }
  Device device() const { return GetParam() == DeviceKind::CPU ? Device::cpu() : Device::cuda(0); }
};

TEST_P(Upload, EveryBatchArrivesUnchangedInTheLoopOrder) {
  BatchUploader up(device(), 5, 4, 3);
  const std::vector<int64_t> sizes = {5, 5, 2, 5, 1, 3};
  int slot = up.stage(make_batch(sizes[0], 0));
  for (size_t k = 0; k < sizes.size(); ++k) {
    DeviceBatch d = up.take(slot);
    if (k + 1 < sizes.size())
      slot = up.stage(make_batch(sizes[k + 1], static_cast<int64_t>(k + 1)));
    const Batch want = make_batch(sizes[k], static_cast<int64_t>(k));
    ASSERT_EQ(d.size, sizes[k]);
    EXPECT_EQ(d.images.device(), device());
    EXPECT_EQ(d.images.shape(), (Shape{sizes[k], 1, 4, 3}));
    EXPECT_EQ(d.labels.shape(), (Shape{sizes[k]}));
    EXPECT_EQ(d.images.to_vector(), want.images) << "batch " << k;
    EXPECT_EQ(d.labels.to_vector_i64(), want.labels) << "batch " << k;
    up.done(d.slot);
  }
}

TEST_P(Upload, BatchesThatDoNotFitAreErrors) {
  BatchUploader up(device(), 5, 4, 3);
  EXPECT_THROW(up.stage(make_batch(6, 0)), Error);
  Batch b = make_batch(2, 0);
  b.rows = 3;
  b.cols = 4;
  EXPECT_THROW(up.stage(b), Error);
  b = make_batch(2, 0);
  b.labels.pop_back();
  EXPECT_THROW(up.stage(b), Error);
  EXPECT_THROW(up.take(0), Error);  // nothing staged
  EXPECT_THROW(BatchUploader(device(), 0, 4, 3), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, Upload, ::testing::Values(DeviceKind::CPU, DeviceKind::CUDA),
                         [](const auto& info) {
                           return std::string(info.param == DeviceKind::CPU ? "cpu" : "cuda");
                         });

}  // namespace
}  // namespace engine::data
