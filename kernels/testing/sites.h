// kernels/testing/sites.h: owns the layer shapes of the four models (nn/models.cpp), per sample:
// every linear, conv, pool, relu, batch-norm and dropout site, which perf mode times at the
// models' batch sizes (table.h). bench_kernels checks them against nn::make_model at start
// (apps/bench_kernels/shapes.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace engine::kernels::testing {

struct LinearSite {
  std::string model, layer;  // layer: the parameter prefix ("fc1"; "" for model linear)
  int64_t in, out;
};

// Stride 1, square kernel; input (c_in, h, w) per sample.
struct ConvSite {
  std::string model, layer;
  int64_t c_in, h, w, c_out, k, pad;
};

// A (c, h, w) activation per sample: pooled 2x2 stride 2, or through relu / batch norm.
struct ActSite {
  std::string model, layer;
  int64_t c, h, w;
  int64_t per_sample() const { return c * h * w; }
};

// Dropout over planes of plane_size per sample (dropout: planes 1; dropout2d: per plane).
struct DropoutSite {
  std::string model, layer;
  int64_t planes, plane_size;
  float p;
  bool per_plane;
};

struct ModelParams {
  std::string model;
  std::vector<int64_t> counts;  // element count of each parameter tensor, in order
};

const std::vector<LinearSite>& linear_sites();
const std::vector<ConvSite>& conv_sites();
const std::vector<ActSite>& pool_sites();       // the max_pool2d inputs
const std::vector<ActSite>& relu_sites();       // the relu inputs
const std::vector<ActSite>& batchnorm_sites();  // the BatchNorm2d inputs
const std::vector<DropoutSite>& dropout_sites();
constexpr int64_t kClasses = 10;  // log_softmax + nll_loss over (N, 10)

}  // namespace engine::kernels::testing
