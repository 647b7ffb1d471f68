// tests/common/test_util.h: the helpers the tests share: reproducible random data, the error
// norm comparisons use, a temporary folder (temp_dir.h), expect_error (expect_error.h), and the
// CUDA device the device tests run on. Header-only; needs only core (tests/io, below core,
// include temp_dir.h and expect_error.h alone).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

namespace engine::testing {

// n uniform values in [lo, hi): element i is philox_uniform(seed, 0, i), the same on every machine
// (and kernels::ref::fill_uniform's numbers).
inline std::vector<float> filled(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = lo + (hi - lo) * philox_uniform(seed, 0, i);
  return v;
}

// A CPU F32 tensor of uniform values in [lo, hi), drawn from Generator(seed).
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1, float hi = 1) {
  Generator g(seed);
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = g.uniform(lo, hi);
  return Tensor::from_vector(v, shape);
}

// max |got - want| / max(max |want|, floor): the error norm of every comparison. A NaN must meet a
// NaN (it then counts as equal); a NaN on one side only, or a size mismatch, is infinite.
// `floor` raises the scale for a result that cancels to almost nothing (a conv bias before a
// BatchNorm, BatchNorm's input gradient over two values): its rounding follows the size of the
// terms it was summed from, not its own.
inline double rel_error(const std::vector<float>& got, const std::vector<float>& want,
                        double floor = 1e-30) {
  if (got.size() != want.size()) return INFINITY;
  double scale = floor, err = 0;
  for (float w : want)
    if (!std::isnan(w)) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) {
      if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
      continue;
    }
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return err / scale;
}

// The same over two F32 tensors of any devices; the shapes must match.
inline double rel_error(const Tensor& got, const Tensor& want, double floor = 1e-30) {
  EXPECT_EQ(shape_str(got.shape()), shape_str(want.shape()));
  return rel_error(got.to_vector(), want.to_vector(), floor);
}

// The largest |value| of a tensor (any device).
inline double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector()) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

inline double dot(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector(), y = b.to_vector();
  double s = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) s += static_cast<double>(x[i]) * y[i];
  return s;
}

// The CUDA device the device tests (tests/kernels/test_cuda_kernels.cpp,
// tests/nn/test_device_ops.cpp) run on: cuda:0 under gtest, --device's under gpu_selftest.
inline Device& cuda_test_device() {
  static Device d = Device::cuda(0);
  return d;
}

// Empty when cuda_test_device() answers, else why not ("no CUDA device: ...").
inline std::string cuda_test_skip_reason() {
  const Device d = cuda_test_device();
  if (cuda_device_count() == 0) return cuda_unavailable_reason();
  if (cuda_device_count() <= d.index) return "no CUDA device: " + d.str() + " is not a device here";
  return "";
}

}  // namespace engine::testing
