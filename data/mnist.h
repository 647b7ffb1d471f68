// data/mnist.h: the MNIST-format datasets (MNIST, Fashion-MNIST): loading a folder's IDX files,
// validating them, and the tutorials' normalisation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace engine::data {

constexpr int64_t kMnistClasses = 10;
// torchvision's transforms.Normalize((0.1307,), (0.3081,)) as used by the tutorials.
constexpr float kMnistMean = 0.1307f;
constexpr float kMnistStd = 0.3081f;

// One split kept as the files hold it: uint8 pixels, normalised only when a batch is assembled.
struct MnistSplit {
  std::string images_path;  // the files it came from, for messages
  std::string labels_path;
  int64_t count = 0;            // N
  int64_t rows = 0, cols = 0;   // from the file, 28x28 for MNIST
  std::vector<uint8_t> images;  // (N, rows, cols)
  std::vector<uint8_t> labels;  // (N), each in 0..9
  int64_t image_numel() const { return rows * cols; }
};

struct Mnist {
  MnistSplit train;  // train-images-idx3-ubyte, train-labels-idx1-ubyte
  MnistSplit test;   // t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte
};

// folder/name if it exists, else folder/name.gz; raw is preferred when both exist (no inflating).
// Throws engine::Error naming the folder and the file when neither exists.
std::string find_mnist_file(const std::string& folder, const std::string& name);

// Loads "<prefix>-images-idx3-ubyte[.gz]" and "<prefix>-labels-idx1-ubyte[.gz]" (prefix "train"
// or "t10k"). Checks images are 3-d, labels 1-d, the counts agree and every label is in 0..9;
// each failure throws engine::Error naming the file(s) and the values.
MnistSplit load_mnist_split(const std::string& folder, const std::string& prefix);
Mnist load_mnist(const std::string& folder);  // both splits, read concurrently

// dst[i] = (src[i] / 255 - 0.1307) / 0.3081, computed in float32 exactly as torchvision's
// ToTensor + Normalize do (so the bits match), through a 256-entry table.
void normalize_into(const uint8_t* src, float* dst, int64_t n);
float normalize_pixel(uint8_t v);

}  // namespace engine::data
