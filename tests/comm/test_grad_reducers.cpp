// tests/comm/test_grad_reducers.cpp: the three reducers as one bucketed engine (comm/grad_sync.h
// with its bucket codecs: float32, bf16/fp16, PowerSGD) on ranks as threads, W = 2 and 3: a
// bucket's work runs on the communication thread as soon as its gradient hooks have fired,
// before finish(); bf16's result is the same whatever the bucket size; PowerSGD in small buckets
// still gives a rank-one gradient's exact mean.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>

#include "comm/half_grad_sync.h"
#include "comm/powersgd.h"
#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"

using namespace engine;
using namespace engine::comm;
using namespace engine::comm::testing;

namespace {

// Rank r's gradients, each value a multiple of 1/4 below 16 that is unique to rank and position
// modulo 61 (exact in bf16 and fp16, and so are sums over three ranks): "w1" (12 x 10), "b1"
// (12), "w2" (6 x 12), "b2" (6). `rank_one` makes "w1" and "w2" s_r u v^T instead (the same
// direction on every rank, as PowerSGD at R = 1 carries exactly), s_r = r + 1, u_i = 1 + i mod 4,
// v_j = (1 + j mod 4) / 4: quarters again, exact in the 16-bit types.
NamedParams rank_params(int r, bool rank_one = false) {
  NamedParams p = {{"w1", Tensor::zeros({12, 10})},
                   {"b1", Tensor::zeros({12})},
                   {"w2", Tensor::zeros({6, 12})},
                   {"b2", Tensor::zeros({6})}};
  size_t at = 0;
  for (auto& [name, t] : p) {
    std::vector<float> g(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < g.size(); ++i, ++at)
      g[i] = static_cast<float>((at * 7 + static_cast<size_t>(r) * 13) % 61) / 4;
    if (rank_one && t.dim() == 2)
      for (int64_t i = 0; i < t.size(0); ++i)
        for (int64_t j = 0; j < t.size(1); ++j)
          g[i * t.size(1) + j] = static_cast<float>((r + 1) * (1 + i % 4) * (1 + j % 4)) / 4;
    t.set_grad(Tensor::from_vector(g, t.shape()));
  }
  return p;
}

// The mean of rank_params' gradient k over W ranks: the sum (exact) times 1 / W, in float32 as
// the 16-bit codec takes it.
std::vector<float> mean_grad(int W, size_t k, bool rank_one = false) {
  std::vector<float> m;
  for (int r = 0; r < W; ++r) {
    const std::vector<float> g = rank_params(r, rank_one)[k].second.grad().to_vector();
    m.resize(g.size(), 0.0f);
    for (size_t i = 0; i < g.size(); ++i) m[i] += g[i];
  }
  for (float& v : m) v *= 1.0f / static_cast<float>(W);
  return m;
}

// The gradient hooks of `param`, as backward fires them when its gradient is final.
void fire_hooks(const Tensor& param) {
  for (const auto& hook : param.impl()->hooks) hook(param.grad());
}

// Waits (at most 20 s) until this rank's communicator has completed more than `seen` collectives.
bool completes_beyond(Communicator& c, uint64_t seen) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (c.transport().progress().completed.load() <= seen) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

using MakeReducer =
    std::function<std::unique_ptr<GradSync>(Communicator&, const NamedParams&, size_t)>;

struct Kind {
  const char* name;
  MakeReducer make;
};

std::vector<Kind> kinds() {
  return {{"float32",
           [](Communicator& c, const NamedParams& p, size_t bucket) {
             return std::make_unique<GradSync>(c, p, SyncMode::Bucketed, bucket);
           }},
          {"bf16",
           [](Communicator& c, const NamedParams& p, size_t bucket) {
             return std::make_unique<HalfGradSync>(c, p, DType::BF16, bucket);
           }},
          {"powersgd", [](Communicator& c, const NamedParams& p, size_t bucket) {
             return std::make_unique<PowerSgd>(c, p, 1, 0, 7, bucket);
           }}};
}

}  // namespace

// Hooks fired for the first bucket only (the last parameters, as backward makes them): its
// collective completes with no finish() called, then finish() does the rest. Every kind, W = 2, 3.
TEST(GradReducers, ABucketsWorkRunsAsSoonAsItsHooksHaveFired) {
  for (int W : {2, 3})
    for (const Kind& kind : kinds()) {
      auto comms = make_mem_communicators(W);
      expect_no_errors(run_threads(W, [&](int r) {
        NamedParams p = rank_params(r, /*rank_one=*/true);
        // 128 bytes: "b2" and "w2" do not fit together; four buckets, "b2" alone first.
        std::unique_ptr<GradSync> reducer = kind.make(*comms[r], p, 128);
        ASSERT_EQ(reducer->buckets().size(), 4u) << kind.name;
        ASSERT_EQ(reducer->buckets()[0], std::vector<size_t>{3}) << kind.name;
        const uint64_t seen = comms[r]->transport().progress().completed.load();
        reducer->begin(0);
        fire_hooks(p[3].second);
        EXPECT_TRUE(completes_beyond(*comms[r], seen))
            << kind.name << " W=" << W << ": the first bucket's collective did not run";
        for (size_t k = 3; k-- > 0;) fire_hooks(p[k].second);
        reducer->finish();
        for (size_t k = 0; k < p.size(); ++k) {
          const std::vector<float> got = p[k].second.grad().to_vector(),
                                   want = mean_grad(W, k, true);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::abs(want[i])))
                << kind.name << " W=" << W << " " << p[k].first << " at " << i;
        }
      }));
    }
}

// bf16 is elementwise: every bucket size (each parameter alone, some together, all in one) gives
// the same bits, the exact mean here; whether the hooks fired during "backward" or not at all.
TEST(GradReducers, Bf16GivesTheSameBitsWhateverTheBucketSize) {
  for (int W : {2, 3}) {
    auto comms = make_mem_communicators(W);
    expect_no_errors(run_threads(W, [&](int r) {
      for (size_t bucket : {size_t{4}, size_t{300}, kDefaultBucketBytes})
        for (bool hooks : {true, false}) {
          NamedParams p = rank_params(r);
          HalfGradSync sync(*comms[r], p, DType::BF16, bucket);
          sync.begin(0);
          if (hooks)
            for (size_t k = p.size(); k-- > 0;) fire_hooks(p[k].second);
          sync.finish();
          for (size_t k = 0; k < p.size(); ++k)
            EXPECT_EQ(p[k].second.grad().to_vector(), mean_grad(W, k))
                << "W=" << W << " bucket " << bucket << " hooks " << hooks << " " << p[k].first;
          // Half of float32's bytes, per bucket as a whole: 2 (W - 1) / W of 2 bytes each.
          int64_t want = 0;
          for (const auto& members : sync.buckets()) {
            int64_t count = 0;
            for (size_t i : members) count += p[i].second.numel();
            want += ring_send_bytes(count * 2, W);
          }
          EXPECT_EQ(sync.bytes_per_step(), want);
        }
    }));
  }
}

// PowerSGD with a bucket per parameter, W = 3: the rank-one matrices come back as their mean,
// the vectors exactly, and each bucket's P and Q are counted in the bytes.
TEST(GradReducers, PowerSgdInSmallBucketsAtThreeRanks) {
  constexpr int W = 3;
  auto comms = make_mem_communicators(W);
  expect_no_errors(run_threads(W, [&](int r) {
    NamedParams p = rank_params(r, /*rank_one=*/true);
    PowerSgd psgd(*comms[r], p, 1, 0, 7, 4);
    ASSERT_EQ(psgd.buckets().size(), 4u);
    EXPECT_EQ(psgd.compressed_count(), 2u);
    psgd.reduce(0);
    for (size_t k = 0; k < p.size(); ++k) {
      const std::vector<float> got = p[k].second.grad().to_vector(), want = mean_grad(W, k, true);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::abs(want[i])))
            << p[k].first << " at " << i;
    }
    EXPECT_EQ(psgd.bytes_per_step(0), ring_send_bytes(6 * 4, W) + ring_send_bytes(6 * 4, W) +
                                          ring_send_bytes(12 * 4, W) + ring_send_bytes(12 * 4, W) +
                                          ring_send_bytes(12 * 4, W) + ring_send_bytes(10 * 4, W));
  }));
}
