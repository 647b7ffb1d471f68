// data/mnist.cpp: finding, loading and validating MNIST-format splits; pixel normalisation.
#include "data/mnist.h"

#include <array>
#include <filesystem>
#include <future>

#include "core/error.h"
#include "data/idx.h"

namespace engine::data {
namespace {

std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (int v = 0; v < 256; ++v) {
    // Two float32 steps like torchvision: ToTensor (x / 255), then Normalize ((x - m) / s).
    float x = static_cast<float>(v) / 255.0f;
    t[v] = (x - kMnistMean) / kMnistStd;
  }
  return t;
}

const std::array<float, 256>& table() {
  static const std::array<float, 256> t = make_table();
  return t;
}

}  // namespace

float normalize_pixel(uint8_t v) {
  return table()[v];
}

void normalize_into(const uint8_t* src, float* dst, int64_t n) {
  const float* t = table().data();
  for (int64_t i = 0; i < n; ++i) dst[i] = t[src[i]];
}

std::string find_mnist_file(const std::string& folder, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path raw = fs::path(folder) / name;
  const fs::path gz = fs::path(folder) / (name + ".gz");
  std::error_code ec;
  if (fs::is_regular_file(raw, ec)) return raw.string();
  if (fs::is_regular_file(gz, ec)) return gz.string();
  ENGINE_FAIL(folder, ": missing MNIST file: neither ", name, " nor ", name, ".gz exists there");
}

MnistSplit load_mnist_split(const std::string& folder, const std::string& prefix) {
  MnistSplit s;
  s.images_path = find_mnist_file(folder, prefix + "-images-idx3-ubyte");
  s.labels_path = find_mnist_file(folder, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(s.images_path);
  IdxArray labels = read_idx(s.labels_path);
  ENGINE_CHECK(images.dims.size() == 3, s.images_path,
               ": expected 3 dims (N, rows, cols) for images, header has ", images.dims.size(),
               " (", dims_to_string(images.dims), ")");
  ENGINE_CHECK(labels.dims.size() == 1, s.labels_path,
               ": expected 1 dim (N) for labels, header has ", labels.dims.size(), " (",
               dims_to_string(labels.dims), ")");
  ENGINE_CHECK(images.dims[1] > 0 && images.dims[2] > 0, s.images_path, ": ", images.dims[1], " x ",
               images.dims[2], " images: an image needs at least one pixel");
  ENGINE_CHECK(images.dims[0] == labels.dims[0], "count mismatch: ", s.images_path, " has ",
               images.dims[0], " images but ", s.labels_path, " has ", labels.dims[0], " labels");
  for (size_t i = 0; i < labels.data.size(); ++i) {
    ENGINE_CHECK(labels.data[i] < kMnistClasses, s.labels_path, ": label at index ", i, " is ",
                 static_cast<int>(labels.data[i]), ", outside 0..", kMnistClasses - 1);
  }
  s.count = images.dims[0];
  s.rows = images.dims[1];
  s.cols = images.dims[2];
  s.images = std::move(images.data);
  s.labels = std::move(labels.data);
  return s;
}

Mnist load_mnist(const std::string& folder) {
  // The test split loads on a second thread while this one inflates the (larger) train split.
  auto test = std::async(std::launch::async, [&] { return load_mnist_split(folder, "t10k"); });
  Mnist m;
  try {
    m.train = load_mnist_split(folder, "train");
    ENGINE_CHECK(m.train.count > 0, m.train.images_path,
                 ": the training set is empty (0 images): nothing to train on");
  } catch (...) {
    test.wait();  // never leave the other thread running past our frame
    throw;
  }
  m.test = test.get();
  return m;
}

}  // namespace engine::data
