// tests/nn/gradcheck.h: finite-difference gradient checks through autograd.
// For y = f(inputs) and a fixed random R of y's shape, L = sum(R * y); autograd's dL/dx is
// compared with (L(x + h) - L(x - h)) / 2h for every element of every input that requires grad.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace engine::testing {

inline Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1, float hi = 1) {
  Generator g(seed);
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = g.uniform(lo, hi);
  return Tensor::from_vector(v, shape);
}

// max |a - b| / max(max |b|, 1e-30) over two tensors of any devices.
inline double rel_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(shape_str(got.shape()), shape_str(want.shape()));
  std::vector<float> g = got.to_vector(), w = want.to_vector();
  double scale = 1e-30, err = 0;
  for (float v : w) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < g.size() && i < w.size(); ++i)
    err = std::max(err, std::fabs(static_cast<double>(g[i]) - w[i]));
  return err / scale;
}

inline double dot(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector(), y = b.to_vector();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += static_cast<double>(x[i]) * y[i];
  return s;
}

// inputs: leaves; those with requires_grad are checked. tol: max |analytic - numeric| allowed,
// relative to max(1, |numeric|).
inline void gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                      std::vector<Tensor> inputs, double h = 1e-2, double tol = 2e-2) {
  Tensor y = f(inputs);
  Tensor r = random_tensor(y.shape(), 99);
  y.backward(r);
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.requires_grad()) continue;
    ASSERT_TRUE(x.grad().defined()) << "input " << k << " got no gradient";
    std::vector<float> analytic = x.grad().to_vector();
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      float orig = p[i];
      p[i] = orig + static_cast<float>(h);
      double lp = dot(r, f(inputs).detach());
      p[i] = orig - static_cast<float>(h);
      double lm = dot(r, f(inputs).detach());
      p[i] = orig;
      double numeric = (lp - lm) / (2 * h);
      double err = std::abs(analytic[i] - numeric) / std::max(1.0, std::abs(numeric));
      ASSERT_LT(err, tol) << "input " << k << " element " << i << ": analytic " << analytic[i]
                          << ", numeric " << numeric;
    }
  }
}

}  // namespace engine::testing
