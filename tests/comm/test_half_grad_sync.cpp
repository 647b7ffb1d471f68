// tests/comm/test_half_grad_sync.cpp: --grad-compression bf16 / fp16 (comm/half_grad_sync.h) on
// ranks as threads: gradients whose sums the 16-bit types hold exactly come back as the exact
// mean; others within the type's rounding; half the bytes of float32 travel.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/half_grad_sync.h"
#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"

using namespace engine;
using namespace engine::comm;
using namespace engine::comm::testing;

namespace {

// Rank r's gradients: "a" (3 x 5) = r + i / 4 (small multiples of 1/4: exact in bf16 and fp16,
// and so are their sums), "b" (7) = 0.1 * (r + 1) * (i + 1) (not exact), "c" (2) none.
NamedParams rank_params(int r) {
  std::vector<float> a(15), b(7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(r) + static_cast<float>(i) / 4;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>((r + 1) * (i + 1));
  NamedParams p = {
      {"a", Tensor::zeros({3, 5})}, {"b", Tensor::zeros({7})}, {"c", Tensor::zeros({2})}};
  p[0].second.set_grad(Tensor::from_vector(a, {3, 5}));
  p[1].second.set_grad(Tensor::from_vector(b, {7}));
  return p;
}

}  // namespace

TEST(HalfGradSync, MeansInBf16AndFp16) {
  constexpr int W = 3;
  for (DType wire : {DType::BF16, DType::F16}) {
    auto comms = make_mem_communicators(W);
    expect_no_errors(run_threads(W, [&](int r) {
      NamedParams p = rank_params(r);
      HalfGradSync sync(*comms[r], p, wire);
      sync.reduce();
      const std::vector<float> a = p[0].second.grad().to_vector(),
                               b = p[1].second.grad().to_vector(),
                               c = p[2].second.grad().to_vector();
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i], 1.0f + static_cast<float>(i) / 4) << dtype_name(wire) << " a " << i;
      // Mean of 0.1 (r + 1)(i + 1) over r = 0, 1, 2: 0.2 (i + 1); bf16 keeps 8 bits.
      const float tol = wire == DType::BF16 ? 1.0f / 64 : 1.0f / 512;
      for (size_t i = 0; i < b.size(); ++i)
        EXPECT_NEAR(b[i], 0.2f * static_cast<float>(i + 1), tol * 0.2f * (i + 1))
            << dtype_name(wire) << " b " << i;
      EXPECT_EQ(c, std::vector<float>(2, 0.0f)) << "no gradient: zeros";
      EXPECT_EQ(sync.bytes_per_step(), 2 * (W - 1) * 24 * 2 / W);
    }));
  }
}

TEST(HalfGradSync, RefusesAWireTypeThatIsNot16Bit) {
  auto comms = make_mem_communicators(1);
  EXPECT_THROW(HalfGradSync(*comms[0], rank_params(0), DType::F32), Error);
}
