// tests/parallel/test_nonfinite.cpp: the non-finite guard (parallel/nonfinite.h): the backward's
// seed, stop naming the first bad step and parameter when its queued scans are read, skip
// counting, off allowing all, and ranks with different tensors (ZeRO-1's shards) agreeing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "parallel/nonfinite.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor vec(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n}, Device::cpu());
}

// Parameters "w0", "w1", "w2" whose gradients are finite but where bad[i] says.
nn::NamedTensors params_with_grads(const std::vector<float>& bad) {
  nn::NamedTensors p;
  for (size_t i = 0; i < bad.size(); ++i) {
    Tensor t = vec({1, 2, 3});
    t.set_grad(vec({0.5f, bad[i], 0.25f}));
    p.emplace_back("w" + std::to_string(i), t);
  }
  return p;
}

Tensor scalar(float v) {
  return Tensor::full({}, v, Device::cpu());
}

TEST(Nonfinite, SeedIsTheScaleForAFiniteLossAndNanOtherwise) {
  NonfiniteGuard g(NonfiniteMode::Stop, {}, Device::cpu(), 0);
  EXPECT_EQ(g.seed(scalar(2.f), 1.f).item(), 1.f);
  EXPECT_EQ(g.seed(scalar(2.f), 0.25f).item(), 0.25f);
  EXPECT_TRUE(std::isnan(g.seed(scalar(kInf), 0.25f).item()));
  NonfiniteGuard off(NonfiniteMode::Off, {}, Device::cpu(), 0);
  EXPECT_FALSE(off.seed(scalar(kNan), 1.f).defined()) << "off: backward's own seed";
  EXPECT_EQ(off.seed(scalar(kNan), 0.5f).item(), 0.5f);
}

TEST(Nonfinite, StopNamesTheFirstBadStepAndParameterWhereTheScansAreRead) {
  nn::NamedTensors p = params_with_grads({0, 0, 0});
  NonfiniteGuard g(NonfiniteMode::Stop, p, Device::cpu(), 3);
  EXPECT_TRUE(g.allow_step(1, scalar(0.5f)));
  g.queue_scan(scalar(0.5f));
  p[1].second.set_grad(vec({kNan, 0, 0}));  // step 2: w1 goes bad; step 3: w0 too
  EXPECT_TRUE(g.allow_step(2, scalar(7.f))) << "stop reads nothing inside the step";
  g.queue_scan(scalar(7.f));
  p[0].second.set_grad(vec({kInf, 0, 0}));
  EXPECT_TRUE(g.allow_step(3, scalar(8.f)));
  g.queue_scan(scalar(8.f));
  try {
    g.check_pending();
    ADD_FAILURE() << "no stop";
  } catch (const NonfiniteStop& e) {
    EXPECT_EQ(e.found(), "step 2: the gradient of w1 is not finite (loss 7 on rank 3)");
    EXPECT_NE(std::string(e.what()).find("; stopped, no checkpoint written from it"),
              std::string::npos);
  }
  g.check_pending();  // the rows were read: nothing left
}

TEST(Nonfinite, SkipRefusesTheStepAndCountsIt) {
  nn::NamedTensors p = params_with_grads({0, kInf, 0});
  NonfiniteGuard g(NonfiniteMode::Skip, p, Device::cpu(), 0);
  EXPECT_FALSE(g.allow_step(1, scalar(1.f)));
  EXPECT_FALSE(g.allow_step(2, scalar(1.f)));
  p[1].second.set_grad(vec({0, 0, 0}));
  EXPECT_TRUE(g.allow_step(3, scalar(1.f)));
  EXPECT_EQ(g.skipped(), 2);
}

TEST(Nonfinite, OffAllowsEveryStep) {
  NonfiniteGuard g(NonfiniteMode::Off, params_with_grads({kNan}), Device::cpu(), 0);
  EXPECT_TRUE(g.allow_step(1, scalar(kNan)));
  g.queue_scan(scalar(kNan));
  g.check_pending();
  EXPECT_EQ(g.skipped(), 0);
}

// Ranks whose tensors differ: rank 1 alone holds the bad one; every rank learns it at once.
TEST(Nonfinite, RanksWithTheirOwnShardsAgreeOnTheVerdict) {
  for (NonfiniteMode mode : {NonfiniteMode::Stop, NonfiniteMode::Skip}) {
    constexpr int kWorld = 3;
    auto comms = comm::make_mem_communicators(kWorld);
    std::vector<std::string> said(kWorld);
    testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
      nn::NamedTensors p = params_with_grads({0, r == 1 ? kNan : 0.f, 0});
      NonfiniteGuard g(mode, p, Device::cpu(), r, comms[r].get());
      try {
        EXPECT_FALSE(g.allow_step(4, scalar(1.f)));
        said[r] = "skipped";
      } catch (const NonfiniteStop& e) {
        said[r] = e.found();
      }
    }));
    for (int r = 0; r < kWorld; ++r)
      EXPECT_EQ(said[r], mode == NonfiniteMode::Skip
                             ? "skipped"
                             : "step 4: the gradient of w1 is not finite (loss 1 on rank " +
                                   std::to_string(r) + ")");
  }
}

TEST(Nonfinite, FirstNonfiniteNamesTheFirstBadFloatTensor) {
  nn::NamedTensors ts = {{"a", vec({1, 2})}, {"b", vec({kInf})}, {"c", vec({kNan})}};
  EXPECT_EQ(first_nonfinite(ts), "b");
  EXPECT_EQ(first_nonfinite({{"a", vec({1})}}), "");
  EXPECT_EQ(first_nonfinite({}), "");
}

}  // namespace
}  // namespace engine::parallel
