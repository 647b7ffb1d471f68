// tests/nn/gradcheck.h: finite-difference gradient checks through autograd: the one such check
// of every op is tests/nn/test_functional.cpp's (kernel tests compare with kernels/cpu/reference,
// device tests with the CPU).
// For y = f(inputs) and a fixed random R of y's shape, L = sum(R * y); autograd's dL/dx is
// compared with (L(x + h) - L(x - h)) / 2h for every element of every input that requires grad.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "tests/common/test_util.h"

namespace engine::testing {

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
