// tests/parallel/test_zero.cpp: ZeRO-1 (parallel/zero.h) over ranks as threads: its step equals
// the unsharded optimizer's bit for bit (gradients whose mean is exact in float), its state
// gathers into the unsharded optimizer's and shards back from it, and what it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "parallel/zero.h"
#include "tests/common/expect_error.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

// Parameters of 3 shapes (one not a multiple of any world size), equal on every rank.
nn::NamedTensors make_params() {
  nn::NamedTensors p;
  const std::vector<std::pair<std::string, Shape>> shapes = {
      {"a.weight", {5, 7}}, {"a.bias", {5}}, {"b.weight", {3, 11}}};
  int k = 0;
  for (const auto& [name, shape] : shapes) {
    Tensor t = Tensor::zeros(shape, DType::F32, Device::cpu());
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (float& x : v) x = static_cast<float>(k++ % 13) / 8.f - 0.75f;
    p.emplace_back(name, Tensor::from_vector(v, shape, Device::cpu()));
  }
  return p;
}

// Rank r's gradients at step s: small multiples of 1/16, so that every order of the sum over ranks
// gives the same float (exact), divided by W once as the averaging collectives divide it.
void set_grads(nn::NamedTensors& params, int rank, int step) {
  int k = 0;
  for (auto& [name, p] : params) {
    std::vector<float> g(static_cast<size_t>(p.numel()));
    for (float& x : g) x = static_cast<float>((k++ * 5 + rank * 3 + step) % 9) / 16.f;
    p.set_grad(Tensor::from_vector(g, p.shape(), Device::cpu()));
  }
}

// The unsharded reference: one optimizer stepping the mean of every rank's gradients, computed
// as all_reduce(avg) computes it (sum in rank order, then divided).
std::vector<nn::NamedTensors> reference(int world, int steps, const OptimizerOptions& o,
                                        nn::NamedTensors* state) {
  nn::NamedTensors p = make_params();
  auto opt = make_optimizer(o, p);
  std::vector<nn::NamedTensors> after;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<float>> sum(p.size());
    for (int r = 0; r < world; ++r) {
      nn::NamedTensors q = make_params();
      set_grads(q, r, s);
      for (size_t i = 0; i < q.size(); ++i) {
        const std::vector<float> g = q[i].second.grad().to_vector();
        if (sum[i].empty()) sum[i].assign(g.size(), 0.f);
        for (size_t j = 0; j < g.size(); ++j) sum[i][j] += g[j];
      }
    }
    for (size_t i = 0; i < p.size(); ++i) {
      for (float& x : sum[i]) x /= static_cast<float>(world);
      p[i].second.set_grad(Tensor::from_vector(sum[i], p[i].second.shape(), Device::cpu()));
    }
    opt->step();
    nn::NamedTensors copy;
    for (const auto& [n, t] : p) copy.emplace_back(n, t.clone());
    after.push_back(copy);
  }
  *state = opt->state();
  return after;
}

// In name order: gather_state() goes bucket by bucket, the optimizers parameter by parameter.
void expect_equal(nn::NamedTensors got, nn::NamedTensors want, const char* what) {
  const auto by_name = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::sort(got.begin(), got.end(), by_name);
  std::sort(want.begin(), want.end(), by_name);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << what;
    EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << what << " " << got[i].first;
  }
}

class ZeroOne : public ::testing::TestWithParam<OptimizerKind> {
 protected:
  OptimizerOptions options() const {
    OptimizerOptions o;
    o.kind = GetParam();
    o.lr = 0.125;
    return o;
  }
};

TEST_P(ZeroOne, StepEqualsTheUnshardedStepBitForBit) {
  for (int world : {1, 2, 3, 4}) {
    nn::NamedTensors want_state;
    const auto want = reference(world, 3, options(), &want_state);
    auto comms = comm::make_mem_communicators(world);
    testing::expect_no_errors(testing::run_threads(world, [&](int r) {
      nn::NamedTensors p = make_params();
      Zero1 z(*comms[r], p, 64, options(), {}, 0);  // 64 bytes: several buckets
      auto reducer = z.make_reducer();
      for (int s = 0; s < 3; ++s) {
        z.zero_grad();
        set_grads(p, r, s);
        reducer->begin(s);
        reducer->finish();
        z.step();
        expect_equal(p, want[s], "parameters");
      }
      EXPECT_EQ(z.steps(), 3);
      const nn::NamedTensors state = z.gather_state();
      if (r == 0) {
        expect_equal(state, want_state, "gathered state");
      } else {
        EXPECT_TRUE(state.empty());
      }
    }));
  }
}

TEST_P(ZeroOne, ShardsAFullStateAndGoesOnAsTheUnshardedRun) {
  constexpr int kWorld = 3;
  nn::NamedTensors state_after_1, state_after_2;
  reference(kWorld, 1, options(), &state_after_1);
  const auto want = reference(kWorld, 2, options(), &state_after_2);
  auto comms = comm::make_mem_communicators(kWorld);
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    nn::NamedTensors p;
    for (const auto& [n, t] : want[0]) p.emplace_back(n, t.clone());  // after step 1
    Zero1 z(*comms[r], p, 64, options(), state_after_1, 1);
    auto reducer = z.make_reducer();
    set_grads(p, r, 1);
    reducer->finish();
    z.step();
    expect_equal(p, want[1], "parameters after the resumed step");
    const nn::Optimizer& full = z.gathered();
    if (r == 0) expect_equal(full.state(), state_after_2, "the checkpoint's optimizer");
    EXPECT_EQ(full.steps(), r == 0 ? 2 : 0);
  }));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ZeroOne,
                         ::testing::Values(OptimizerKind::Sgd, OptimizerKind::Adam),
                         [](const auto& info) {
                           return info.param == OptimizerKind::Sgd ? "Sgd" : "Adam";
                         });

TEST(ZeroOneState, ShrinksByTheWorldSizeAndCountsItsBytes) {
  constexpr int kWorld = 4;
  auto comms = comm::make_mem_communicators(kWorld);
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    nn::NamedTensors p = make_params();  // 35 + 5 + 33 = 73 elements
    OptimizerOptions o;
    o.kind = OptimizerKind::Adam;
    Zero1 z(*comms[r], p, size_t{1} << 20, o, {}, 0);  // one bucket: 76 elements, 19 per rank
    set_grads(p, r, 0);
    z.make_reducer()->finish();
    z.step();
    EXPECT_EQ(z.state_bytes(), size_t{2 * 19 * 4});  // exp_avg and exp_avg_sq of the shard
    EXPECT_EQ(z.bytes_per_step(), 2 * (kWorld - 1) * 19 * 4);
    const nn::NamedTensors shards = z.checked();
    ASSERT_EQ(shards.size(), 1u);
    EXPECT_EQ(shards[0].first, "zero0 (ZeRO-1's bucket of b.weight a.bias a.weight)");
    EXPECT_EQ(z.verdict_comm(), comms[r].get());
  }));
}

TEST(ZeroOneState, AStateWithoutAParametersEntryIsRefused) {
  auto comms = comm::make_mem_communicators(1);
  nn::NamedTensors p = make_params();
  OptimizerOptions o;
  o.momentum = 0.5;
  nn::NamedTensors state;
  reference(1, 1, o, &state);
  state.erase(state.begin());  // a.weight's momentum; b.weight leads the one bucket
  engine::testing::expect_error([&] { Zero1(*comms[0], p, size_t{1} << 20, o, state, 1); },
                                {"ZeRO-1: optimizer state 'a.weight.momentum_buffer' is missing"});
}

}  // namespace
}  // namespace engine::parallel
