// tests/comm/test_powersgd.cpp: PowerSGD (comm/powersgd.h) on ranks as threads: before its start
// step it averages exactly; a rank-1 gradient (the same direction on every rank) comes back as the
// exact mean at R = 1 while the error feedback keeps each rank's remainder; vectors travel
// uncompressed; its state round-trips.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/powersgd.h"
#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"

using namespace engine;
using namespace engine::comm;
using namespace engine::comm::testing;

namespace {

constexpr int64_t kRows = 24, kCols = 30;

// "w" (kRows x kCols) = s_r * u v^T with u_i = i + 1, v_j = 1 - j / 30, plus `noise` times a
// full-rank pattern of the rank's own; "b" (kRows) = r + i.
NamedParams rank_params(int r, float noise = 0) {
  const float s = 1.0f + static_cast<float>(r);  // this rank's scale
  std::vector<float> w(kRows * kCols), b(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    b[i] = static_cast<float>(r + i);
    for (int64_t j = 0; j < kCols; ++j)
      w[i * kCols + j] = s * static_cast<float>(i + 1) * (1.0f - static_cast<float>(j) / kCols) +
                         noise * std::sin(0.7f * i + 1.3f * j * (r + 1));
  }
  NamedParams p = {{"w", Tensor::zeros({kRows, kCols})}, {"b", Tensor::zeros({kRows})}};
  p[0].second.set_grad(Tensor::from_vector(w, {kRows, kCols}));
  p[1].second.set_grad(Tensor::from_vector(b, {kRows}));
  return p;
}

// The mean of rank_params' gradients over W ranks.
std::vector<float> mean_grad(int W, size_t k) {
  std::vector<float> m;
  for (int r = 0; r < W; ++r) {
    std::vector<float> g = rank_params(r)[k].second.grad().to_vector();
    if (m.empty()) m.assign(g.size(), 0.0f);
    for (size_t i = 0; i < g.size(); ++i) m[i] += g[i] / static_cast<float>(W);
  }
  return m;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::abs(want[i]))) << what << " at " << i;
}

}  // namespace

TEST(PowerSgd, AveragesExactlyBeforeItsStartStep) {
  constexpr int W = 3;
  auto comms = make_mem_communicators(W);
  expect_no_errors(run_threads(W, [&](int r) {
    NamedParams p = rank_params(r);
    PowerSgd psgd(*comms[r], p, /*rank=*/1, /*start=*/5, /*seed=*/7);
    EXPECT_EQ(psgd.compressed_count(), 1u);  // "w"; "b" is a vector
    psgd.reduce(4);
    expect_near_all(p[0].second.grad().to_vector(), mean_grad(W, 0), 1e-6f, "w");
    expect_near_all(p[1].second.grad().to_vector(), mean_grad(W, 1), 1e-6f, "b");
    EXPECT_EQ(psgd.bytes_per_step(4), 2 * (W - 1) * (kRows * kCols + kRows) * 4 / W);
  }));
}

TEST(PowerSgd, ARankOneGradientComesBackAsTheMeanWithTheRestInTheErrorFeedback) {
  constexpr int W = 2;
  auto comms = make_mem_communicators(W);
  std::vector<NamedParams> states(W);
  expect_no_errors(run_threads(W, [&](int r) {
    NamedParams p = rank_params(r);
    PowerSgd psgd(*comms[r], p, /*rank=*/1, /*start=*/0, /*seed=*/7);
    psgd.reduce(0);
    expect_near_all(p[0].second.grad().to_vector(), mean_grad(W, 0), 1e-5f, "w");
    expect_near_all(p[1].second.grad().to_vector(), mean_grad(W, 1), 1e-6f, "b");
    // Sent: the vector, then P (kRows x 1) and Q (kCols x 1), not kRows x kCols.
    EXPECT_EQ(psgd.bytes_per_step(0), 2 * (W - 1) * (kRows + kRows + kCols) * 4 / W);
    NamedParams st = psgd.gather_state();
    if (r == 0) {
      states[0] = st;
    } else {
      EXPECT_TRUE(st.empty());
    }
  }));
  // Rank 0 holds Q and each rank's error: its gradient minus the mean, here (s_r - 1.5) u v^T.
  ASSERT_EQ(states[0].size(), 3u);
  EXPECT_EQ(states[0][0].first, "w.powersgd_q");
  for (int r = 0; r < W; ++r) {
    EXPECT_EQ(states[0][1 + r].first, "w.powersgd_error.rank" + std::to_string(r));
    std::vector<float> e = states[0][1 + r].second.to_vector(), want = mean_grad(1, 0);
    const std::vector<float> g = rank_params(r)[0].second.grad().to_vector(), m = mean_grad(W, 0);
    for (size_t i = 0; i < want.size(); ++i) want[i] = g[i] - m[i];
    expect_near_all(e, want, 1e-4f, "error feedback");
  }
}

TEST(PowerSgd, ResumingFromItsStateTakesTheSameNextStep) {
  constexpr int W = 2;
  auto comms = make_mem_communicators(W);
  NamedParams saved;
  std::vector<std::vector<float>> cont(W), resumed(W), fresh(W);  // rank r's "w" grad
  expect_no_errors(run_threads(W, [&](int r) {
    NamedParams p = rank_params(r, 3.0f);  // full rank: R = 2 leaves an error to feed back
    PowerSgd a(*comms[r], p, 2, 0, 7);
    a.reduce(0);
    NamedParams st = a.gather_state();
    if (r == 0) saved = st;
    NamedParams again = rank_params(r, 3.0f);  // the next step's gradients: the same ones
    for (size_t k = 0; k < p.size(); ++k) p[k].second.set_grad(again[k].second.grad());
    a.reduce(1);
    cont[r] = p[0].second.grad().to_vector();
  }));
  ASSERT_FALSE(saved.empty());
  auto next_step = [&](bool load, std::vector<std::vector<float>>& out) {
    expect_no_errors(run_threads(W, [&](int r) {
      NamedParams p = rank_params(r, 3.0f);
      PowerSgd b(*comms[r], p, 2, 0, 99);  // another seed: Q must come from the state
      if (load) b.load_state(saved);
      b.reduce(1);
      out[r] = p[0].second.grad().to_vector();
    }));
  };
  next_step(true, resumed);
  next_step(false, fresh);
  EXPECT_EQ(cont, resumed);
  EXPECT_NE(cont, fresh);  // without the state the step differs: the test can fail
  // A state of another rank R is refused.
  expect_no_errors(run_threads(W, [&](int r) {
    NamedParams p = rank_params(r);
    PowerSgd c(*comms[r], p, 3, 0, 7);
    EXPECT_THROW(c.load_state(saved), Error);
  }));
}
