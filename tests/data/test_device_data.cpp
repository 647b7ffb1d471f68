// tests/data/test_device_data.cpp: --data-on-device: the choice (auto, on, off against the device
// and its free memory), the gather whose CPU version is the reference, and whole epochs through
// BatchUploader with the split on the device equal to the host's batches, bit for bit (the CUDA
// case skipped with "no CUDA device" where none answers).
#include <gtest/gtest.h>

#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/device_data.h"
#include "data/loader.h"
#include "data/upload.h"
#include "kernels/cpu/gather.h"

namespace engine::data {
namespace {

// Sample i: pixels (i + 11 j) % 256, label i % 10.
MnistSplit split_of(int64_t n) {
  MnistSplit s;
  s.images_path = "fake-images";
  s.count = n;
  s.rows = 2;
  s.cols = 3;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 6; ++j) s.images.push_back(static_cast<uint8_t>((i + 11 * j) % 256));
    s.labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return s;
}

TEST(DataOnDevice, Choice) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_FALSE(choose_data_on_device("off", true, 1, 100 * kMiB).on);
  DataOnDeviceChoice c = choose_data_on_device("auto", false, 1, 0);
  EXPECT_FALSE(c.on);
  EXPECT_FALSE(c.refused);
  EXPECT_EQ(c.reason, "the device is the CPU");
  EXPECT_TRUE(choose_data_on_device("on", false, 1, 0).refused);
  EXPECT_TRUE(choose_data_on_device("auto", true, 25 * kMiB, 100 * kMiB).on);  // a quarter
  c = choose_data_on_device("auto", true, 26 * kMiB, 100 * kMiB);
  EXPECT_FALSE(c.on);
  EXPECT_EQ(c.reason, "the training set's 26 MiB exceed a quarter of the 100 MiB free");
  EXPECT_TRUE(choose_data_on_device("on", true, 26 * kMiB, 100 * kMiB).on);
  EXPECT_THROW(choose_data_on_device("yes", true, 1, 1), Error);
  EXPECT_EQ(device_split_nbytes(split_of(10)), 10u * (6 * 4 + 8));
}

TEST(DataOnDevice, CpuGatherIsTheReference) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // 3 rows of 2
  const std::vector<int64_t> idx = {2, 0, 2};
  std::vector<float> out(6);
  kernels::cpu::gather_rows_f32(table.data(), 3, 2, idx.data(), 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1, 20, 21}));
  const std::vector<int64_t> bad = {1, 3};
  try {
    kernels::cpu::gather_rows_f32(table.data(), 3, 2, bad.data(), 2, out.data());
    ADD_FAILURE() << "index 3 of 3 rows accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 3 at position 1"), std::string::npos) << e.what();
  }
}

class DeviceData : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceKind::CUDA && cuda_device_count() == 0)
      GTEST_SKIP() << cuda_unavailable_reason();
  }
  Device device() const { return GetParam() == DeviceKind::CPU ? Device::cpu() : Device::cuda(0); }
};

// Two epochs of 23 samples in batches of 5 (the last short), shuffled: the device's gather
// equals the host's batch.
TEST_P(DeviceData, EpochsEqualTheHostBatches) {
  const MnistSplit s = split_of(23);
  std::vector<int64_t> shard(23);
  for (int64_t i = 0; i < 23; ++i) shard[i] = i;
  BatchLoader host(s, shard, 5, true, false, 9, 0, 0), idx(s, shard, 5, true, false, 9, 0, 0);
  idx.set_indices_only(true);
  const DeviceDataset data(s, device());
  BatchUploader up(device(), 5, 2, 3, &data);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    host.start_epoch(epoch);
    idx.start_epoch(epoch);
    Batch want, b;
    int batches = 0;
    while (host.next(&want)) {
      ASSERT_TRUE(idx.next(&b));
      EXPECT_TRUE(b.images.empty());
      DeviceBatch d = up.take(up.stage(b));
      ASSERT_EQ(d.size, want.size);
      EXPECT_EQ(d.images.shape(), (Shape{want.size, 1, 2, 3}));
      EXPECT_EQ(d.images.to_vector(), want.images) << "epoch " << epoch << " batch " << batches;
      EXPECT_EQ(d.labels.to_vector_i64(), want.labels);
      up.done(d.slot);
      ++batches;
    }
    EXPECT_FALSE(idx.next(&b));
    EXPECT_EQ(batches, 5);
  }
}

TEST_P(DeviceData, IndicesOutsideTheSplitAreRefusedOnTheHost) {
  const MnistSplit s = split_of(4);
  const DeviceDataset data(s, device());
  BatchUploader up(device(), 5, 2, 3, &data);
  Batch b;
  b.size = 2;
  b.rows = 2;
  b.cols = 3;
  b.indices = {1, 4};
  EXPECT_THROW(up.stage(b), Error);
  b.indices = {1};
  EXPECT_THROW(up.stage(b), Error);
  EXPECT_THROW(BatchUploader(device(), 5, 3, 2, &data), Error);  // another image shape
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceData, ::testing::Values(DeviceKind::CPU, DeviceKind::CUDA),
                         [](const auto& info) {
                           return std::string(info.param == DeviceKind::CPU ? "cpu" : "cuda");
                         });

}  // namespace
}  // namespace engine::data
