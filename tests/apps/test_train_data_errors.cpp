// tests/apps/test_train_data_errors.cpp: data that the models cannot take is refused when the
// dataset is opened, naming the file and what was expected: images of another size, 0 x 0
// images, labels out of range, image and label counts that differ.
#include <vector>

#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

class DataErrors : public TrainTest {
 protected:
  // A dataset in `name`/ whose train split has n images of rows x cols and the given labels.
  std::string dataset(const std::string& name, int64_t rows, int64_t cols,
                      const std::vector<uint8_t>& labels) {
    const std::string dir = (dir_ / name).string();
    write_dataset(dir, 64, 32);
    const int64_t n = static_cast<int64_t>(labels.size());
    fs::remove(dir + "/train-images-idx3-ubyte.gz");
    fs::remove(dir + "/train-labels-idx1-ubyte.gz");
    data::write_idx(dir + "/train-images-idx3-ubyte", {n, rows, cols},
                    std::vector<uint8_t>(n * rows * cols, 7), false);
    data::write_idx(dir + "/train-labels-idx1-ubyte", {n}, labels, false);
    return dir;
  }
  RunResult train(const std::string& dir) {
    return run(kTrain + " --model simplecnn --steps 1 --threads 1 --data-dir " + dir);
  }
};

TEST_F(DataErrors, ImagesOfAnotherSizeNameTheFileAndTheModelsSize) {
  const std::string dir = dataset("small", 14, 14, std::vector<uint8_t>(64, 1));
  RunResult r = train(dir);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("train: " + dir +
                          "/train-images-idx3-ubyte: 14 x 14 images; simplecnn needs "
                          "28 x 28"),
            std::string::npos)
      << r.output;
}

TEST_F(DataErrors, ZeroByZeroImagesAreRefused) {
  const std::string dir = dataset("empty", 0, 0, std::vector<uint8_t>(64, 1));
  RunResult r = train(dir);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(dir + "/train-images-idx3-ubyte: 0 x 0 images"), std::string::npos)
      << r.output;
}

TEST_F(DataErrors, ALabelOutOfRangeNamesTheFileAndTheIndex) {
  std::vector<uint8_t> labels(64, 2);
  labels[17] = 10;
  const std::string dir = dataset("labels", 28, 28, labels);
  RunResult r = train(dir);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(dir + "/train-labels-idx1-ubyte: label at index 17 is 10, outside 0..9"),
            std::string::npos)
      << r.output;
}

TEST_F(DataErrors, CountsThatDifferNameBothFiles) {
  const std::string dir = dataset("counts", 28, 28, std::vector<uint8_t>(64, 1));
  data::write_idx(dir + "/train-labels-idx1-ubyte", {63}, std::vector<uint8_t>(63, 1), false);
  RunResult r = train(dir);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(dir + "/train-images-idx3-ubyte has 64 images but " + dir +
                          "/train-labels-idx1-ubyte has 63 labels"),
            std::string::npos)
      << r.output;
}

}  // namespace
