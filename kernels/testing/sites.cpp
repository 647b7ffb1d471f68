// kernels/testing/sites.cpp: the sites of nn/models.cpp, read off its forward() comments.
#include "kernels/testing/sites.h"

namespace engine::kernels::testing {

const std::vector<LinearSite>& linear_sites() {
  static const std::vector<LinearSite> s = {
      {"simplecnn", "fc1", 3136, 128}, {"simplecnn", "fc2", 128, 10}, {"convnet", "fc", 1568, 10},
      {"net", "fc1", 320, 50},         {"net", "fc2", 50, 10},        {"linear", "", 784, 10},
  };
  return s;
}

const std::vector<ConvSite>& conv_sites() {
  static const std::vector<ConvSite> s = {
      {"simplecnn", "conv1", 1, 28, 28, 32, 3, 1},  {"simplecnn", "conv2", 32, 14, 14, 64, 3, 1},
      {"convnet", "layer1.0", 1, 28, 28, 16, 5, 2}, {"convnet", "layer2.0", 16, 14, 14, 32, 5, 2},
      {"net", "conv1", 1, 28, 28, 10, 5, 0},        {"net", "conv2", 10, 12, 12, 20, 5, 0},
  };
  return s;
}

const std::vector<ActSite>& pool_sites() {
  static const std::vector<ActSite> s = {
      {"simplecnn", "pool1", 32, 28, 28},  {"simplecnn", "pool2", 64, 14, 14},
      {"convnet", "layer1.3", 16, 28, 28}, {"convnet", "layer2.3", 32, 14, 14},
      {"net", "pool1", 10, 24, 24},        {"net", "pool2", 20, 8, 8},
  };
  return s;
}

const std::vector<ActSite>& relu_sites() {
  static const std::vector<ActSite> s = {
      {"simplecnn", "relu1", 32, 14, 14},   {"simplecnn", "relu2", 64, 7, 7},
      {"simplecnn", "relu_fc1", 128, 1, 1}, {"convnet", "layer1.2", 16, 28, 28},
      {"convnet", "layer2.2", 32, 14, 14},  {"net", "relu1", 10, 12, 12},
      {"net", "relu2", 20, 4, 4},           {"net", "relu_fc1", 50, 1, 1},
  };
  return s;
}

const std::vector<ActSite>& batchnorm_sites() {
  static const std::vector<ActSite> s = {
      {"convnet", "layer1.1", 16, 28, 28},
      {"convnet", "layer2.1", 32, 14, 14},
  };
  return s;
}

const std::vector<DropoutSite>& dropout_sites() {
  static const std::vector<DropoutSite> s = {
      {"simplecnn", "dropout1", 1, 3136, 0.25f, false},
      {"simplecnn", "dropout2", 1, 128, 0.5f, false},
      {"net", "conv2_drop", 20, 64, 0.5f, true},
      {"net", "dropout", 1, 50, 0.5f, false},
  };
  return s;
}

}  // namespace engine::kernels::testing
