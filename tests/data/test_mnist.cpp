// Tests data/mnist.h: a small MNIST-format folder in a temp dir, and each way it can be wrong.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "data/idx.h"
#include "data/mnist.h"
#include "tests/common/test_util.h"

namespace engine::data {
namespace {

namespace fs = std::filesystem;

class MnistTest : public ::testing::Test {
 protected:
  std::string folder() const { return dir_.path().string(); }
  std::string path(const std::string& name) const { return dir_.file(name); }

  // n images of rows x cols (pixel j of image i = i * 3 + j) and n labels i % 10.
  void write_split(const std::string& prefix, int64_t n, int64_t rows, int64_t cols, bool gz) {
    std::vector<uint8_t> images, labels;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < rows * cols; ++j) images.push_back(static_cast<uint8_t>(i * 3 + j));
      labels.push_back(static_cast<uint8_t>(i % 10));
    }
    const std::string ext = gz ? ".gz" : "";
    write_idx(path(prefix + "-images-idx3-ubyte" + ext), {n, rows, cols}, images, gz);
    write_idx(path(prefix + "-labels-idx1-ubyte" + ext), {n}, labels, gz);
  }

  void expect_error(const std::string& prefix, std::initializer_list<std::string> parts) {
    testing::expect_error([&] { load_mnist_split(folder(), prefix); }, parts);
  }
  testing::TempDir dir_;
};

TEST_F(MnistTest, LoadsRawAndGzipSplits) {
  write_split("train", 12, 4, 5, /*gz=*/false);
  write_split("t10k", 7, 4, 5, /*gz=*/true);
  Mnist m = load_mnist(folder());
  EXPECT_EQ(m.train.count, 12);
  EXPECT_EQ(m.train.rows, 4);
  EXPECT_EQ(m.train.cols, 5);
  EXPECT_EQ(m.train.image_numel(), 20);
  EXPECT_EQ(m.train.images.size(), 12u * 20u);
  EXPECT_EQ(m.train.images[3 * 20 + 7], 3 * 3 + 7);
  EXPECT_EQ(m.train.labels[11], 1);
  EXPECT_EQ(m.test.count, 7);
  EXPECT_EQ(m.test.images[6 * 20 + 19], 6 * 3 + 19);
  EXPECT_EQ(m.test.labels_path, path("t10k-labels-idx1-ubyte.gz"));
  EXPECT_EQ(m.train.images_path, path("train-images-idx3-ubyte"));
}

TEST_F(MnistTest, RowsAndColsComeFromTheFile) {
  write_split("train", 3, 28, 28, true);
  MnistSplit s = load_mnist_split(folder(), "train");
  EXPECT_EQ(s.rows, 28);
  write_split("t10k", 2, 7, 9, true);
  s = load_mnist_split(folder(), "t10k");
  EXPECT_EQ(s.rows, 7);
  EXPECT_EQ(s.cols, 9);
}

TEST_F(MnistTest, PrefersRawWhenBothExist) {
  write_split("train", 5, 2, 2, true);
  write_split("train", 6, 2, 2, false);
  EXPECT_EQ(load_mnist_split(folder(), "train").count, 6);
  EXPECT_EQ(find_mnist_file(folder(), "train-images-idx3-ubyte"), path("train-images-idx3-ubyte"));
}

TEST_F(MnistTest, MissingFileNamesFolderAndFile) {
  write_split("train", 5, 2, 2, true);
  fs::remove(path("train-labels-idx1-ubyte.gz"));
  expect_error("train", {folder(), "train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz"});
  // t10k is missing too; whichever is reported names its file.
  testing::expect_error([&] { load_mnist(folder()); }, {"missing MNIST file"});
}

TEST_F(MnistTest, CountMismatchNamesBothFiles) {
  write_split("train", 5, 2, 2, false);
  write_idx(path("train-labels-idx1-ubyte"), {4}, {0, 1, 2, 3}, false);
  expect_error("train", {path("train-images-idx3-ubyte"), "5 images",
                         path("train-labels-idx1-ubyte"), "4 labels"});
}

TEST_F(MnistTest, LabelOutOfRangeNamesFileIndexValue) {
  write_split("train", 5, 2, 2, true);
  write_idx(path("train-labels-idx1-ubyte.gz"), {5}, {0, 1, 2, 10, 4}, true);
  expect_error("train", {path("train-labels-idx1-ubyte.gz"), "label at index 3 is 10", "0..9"});
}

TEST_F(MnistTest, WrongRankOfImages) {
  write_split("train", 4, 2, 2, false);
  write_idx(path("train-images-idx3-ubyte"), {4, 4}, std::vector<uint8_t>(16), false);
  expect_error("train", {path("train-images-idx3-ubyte"), "expected 3 dims", "4x4"});
}

TEST_F(MnistTest, BadIdxInsideSplitNamesTheFile) {
  write_split("t10k", 4, 2, 2, false);
  write_idx(path("t10k-images-idx3-ubyte"), {5, 2, 2}, std::vector<uint8_t>(20), false);
  fs::resize_file(path("t10k-images-idx3-ubyte"), 16 + 7);
  expect_error("t10k", {path("t10k-images-idx3-ubyte"), "truncated", "5x2x2 = 20", "file has 7"});
}

}  // namespace
}  // namespace engine::data
