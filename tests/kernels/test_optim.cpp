// tests/kernels/test_optim.cpp: SGD and Adam steps against values printed by torch 1.13
// (torch.optim.SGD / Adam on a float32 parameter [0.5, -1.25, 2.0] with the gradients below),
// and against the double-precision reference.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/reference.h"

namespace engine::kernels {
namespace {

const std::vector<float> kStart = {0.5f, -1.25f, 2.0f};
const std::vector<std::vector<float>> kGrads = {
    {0.1f, -0.2f, 0.3f}, {-0.05f, 0.4f, 0.25f}, {0.2f, 0.1f, -0.3f}};

using Steps = std::vector<std::vector<float>>;

Steps run_sgd(const SgdConfig& c) {
  std::vector<float> p = kStart, buf(3);
  Steps out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    cpu::sgd_step(p.data(), kGrads[s].data(), buf.data(), 3, c, s == 0);
    out.push_back(p);
  }
  return out;
}

Steps run_adam(const AdamConfig& c) {
  std::vector<float> p = kStart, m(3), v(3);
  Steps out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    cpu::adam_step(p.data(), kGrads[s].data(), m.data(), v.data(), 3, c,
                   static_cast<int64_t>(s) + 1);
    out.push_back(p);
  }
  return out;
}

void expect_close(const Steps& got, const Steps& want) {
  for (size_t s = 0; s < want.size(); ++s)
    for (size_t i = 0; i < want[s].size(); ++i)
      EXPECT_NEAR(got[s][i], want[s][i], 2e-7 * std::max(1.f, std::fabs(want[s][i])))
          << "step " << s + 1 << " element " << i;
}

TEST(Sgd, MatchesTorch) {
  expect_close(run_sgd({0.1}), {{0.49000001f, -1.23000002f, 1.97000003f},
                                {0.495000005f, -1.26999998f, 1.94500005f},
                                {0.474999994f, -1.27999997f, 1.97500002f}});
  expect_close(run_sgd({0.1, 0.9, 0.1, 0.01}), {{0.489499986f, -1.22874999f, 1.96800005f},
                                                {0.484109432f, -1.24451911f, 1.91492879f},
                                                {0.460822225f, -1.26659131f, 1.89244127f}});
  SgdConfig nesterov{0.05, 0.8, 0.0, 0.001};
  nesterov.nesterov = true;
  expect_close(run_sgd(nesterov), {{0.490954995f, -1.23188746f, 1.97282004f},
                                   {0.492194802f, -1.26133657f, 1.94047844f},
                                   {0.473161995f, -1.27783167f, 1.95150948f}});
}

TEST(Adam, MatchesTorch) {
  expect_close(run_adam({}), {{0.499000013f, -1.24899995f, 1.99899995f},
                              {0.49873367f, -1.24936604f, 1.99800873f},
                              {0.498075545f, -1.24978173f, 1.99779069f}});
  expect_close(run_adam({0.01, 0.8, 0.99, 1e-6, 0.1}), {{0.490000069f, -1.24000001f, 1.99000001f},
                                                        {0.483751535f, -1.24029493f, 1.98007143f},
                                                        {0.475365818f, -1.24010777f, 1.97402751f}});
}

TEST(Optim, MatchReferenceOnManyElements) {
  const int64_t n = 100001;
  std::vector<float> p(n), g(n), p_ref, buf(n), buf_ref(n), m(n), v(n), m_ref(n), v_ref(n);
  ref::fill_uniform(p.data(), n, 1);
  p_ref = p;
  SgdConfig sgd{0.05, 0.9, 0.0, 1e-4};
  AdamConfig adam{1e-3, 0.9, 0.999, 1e-8, 1e-4};
  for (int step = 1; step <= 3; ++step) {
    ref::fill_uniform(g.data(), n, 10 + step);
    cpu::sgd_step(p.data(), g.data(), buf.data(), n, sgd, step == 1);
    ref::sgd_step(p_ref.data(), g.data(), buf_ref.data(), n, sgd, step == 1);
    cpu::adam_step(p.data(), g.data(), m.data(), v.data(), n, adam, step);
    ref::adam_step(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, adam, step);
  }
  EXPECT_LT(ref::max_rel_error(p.data(), p_ref.data(), n), 1e-5);
  EXPECT_LT(ref::max_rel_error(buf.data(), buf_ref.data(), n), 1e-5);
  EXPECT_LT(ref::max_rel_error(m.data(), m_ref.data(), n), 1e-5);
  EXPECT_LT(ref::max_rel_error(v.data(), v_ref.data(), n), 1e-5);
}

// The vectorised loops against kernels/optim.h's per-element updates, bit for bit: every SGD
// option, Adam with and without weight decay, counts around the 16-lane blocks and the grain.
TEST(Optim, StepsEqualThePerElementUpdates) {
  const SgdConfig sgds[] = {{0.05, 0.0, 0.0, 0.0},
                            {0.05, 0.0, 0.0, 1e-3},
                            {0.05, 0.9, 0.0, 0.0},
                            {0.05, 0.9, 0.3, 1e-3},
                            {0.05, 0.9, 0.0, 1e-3, true}};
  const AdamConfig adams[] = {{1e-3, 0.9, 0.999, 1e-8, 0.0}, {1e-2, 0.8, 0.99, 1e-6, 1e-2}};
  for (int64_t n : {1, 15, 16, 17, 33, 32768 * 2 + 5}) {
    std::vector<float> p0(n), g(n);
    ref::fill_uniform(p0.data(), n, 3);
    for (const SgdConfig& c : sgds) {
      std::vector<float> p = p0, want = p0, buf(n), want_buf(n);
      for (int step = 1; step <= 3; ++step) {
        ref::fill_uniform(g.data(), n, 20 + step);
        cpu::sgd_step(p.data(), g.data(), c.momentum != 0 ? buf.data() : nullptr, n, c, step == 1);
        const SgdCoeffs k = sgd_coeffs(c);
        for (int64_t i = 0; i < n; ++i) sgd_update(want[i], g[i], want_buf[i], k, step == 1);
      }
      ASSERT_EQ(p, want) << "sgd n " << n << " momentum " << c.momentum;
      if (c.momentum != 0) {
        ASSERT_EQ(buf, want_buf) << "sgd n " << n;
      }
    }
    for (const AdamConfig& c : adams) {
      std::vector<float> p = p0, want = p0, m(n), v(n), wm(n), wv(n);
      for (int step = 1; step <= 3; ++step) {
        ref::fill_uniform(g.data(), n, 30 + step);
        cpu::adam_step(p.data(), g.data(), m.data(), v.data(), n, c, step);
        const AdamCoeffs k = adam_coeffs(c, step);
        for (int64_t i = 0; i < n; ++i) adam_update(want[i], g[i], wm[i], wv[i], k);
      }
      ASSERT_EQ(p, want) << "adam n " << n;
      ASSERT_EQ(m, wm) << "adam n " << n;
      ASSERT_EQ(v, wv) << "adam n " << n;
    }
  }
}

TEST(Optim, RejectsMisuse) {
  std::vector<float> p(2), g(2);
  EXPECT_THROW(cpu::sgd_step(p.data(), g.data(), nullptr, 2, {0.1, 0.9}, true), Error);
  SgdConfig bad{0.1, 0.9, 0.5};
  bad.nesterov = true;
  std::vector<float> buf(2);
  EXPECT_THROW(cpu::sgd_step(p.data(), g.data(), buf.data(), 2, bad, true), Error);
  std::vector<float> m(2), v(2);
  EXPECT_THROW(cpu::adam_step(p.data(), g.data(), m.data(), v.data(), 2, {}, 0), Error);
  cpu::sgd_step(p.data(), g.data(), nullptr, 2, {0.1}, true);  // no momentum: no buffer needed
}

// The fused multi-tensor step equals one call per tensor bit for bit: sizes across the thread
// split (kGrain is 32768) and tensor boundaries, an empty tensor, a first momentum step beside
// later ones.
struct MultiCase {
  std::vector<std::vector<float>> p, g, b, b2;
  std::vector<OptimTensor> table(const std::vector<bool>& first) {
    std::vector<OptimTensor> ts;
    for (size_t k = 0; k < p.size(); ++k)
      ts.push_back({p[k].data(), g[k].data(), b[k].data(), b2[k].data(),
                    static_cast<int64_t>(p[k].size()), first[k]});
    return ts;
  }
};

MultiCase multi_case() {
  MultiCase c;
  uint64_t seed = 11;
  for (int64_t n : {40001, 17, 0, 1, 70003, 33}) {
    for (auto* v : {&c.p, &c.g, &c.b, &c.b2}) {
      v->emplace_back(static_cast<size_t>(n));
      ref::fill_uniform(v->back().data(), n, seed++);
    }
    for (float& x : c.b2.back()) x = x * x;  // Adam's v is never negative
  }
  return c;
}

TEST(OptimMulti, FusedSgdAndAdamEqualThePerTensorCallsBitForBit) {
  SgdConfig sc;
  sc.lr = 0.05;
  sc.momentum = 0.9;
  sc.weight_decay = 1e-3;
  sc.nesterov = true;
  const std::vector<bool> first = {true, false, false, true, false, false};
  MultiCase one = multi_case(), fused = multi_case();
  for (const OptimTensor& t : one.table(first))
    if (t.count > 0) cpu::sgd_step(t.param, t.grad, t.buf, t.count, sc, t.first);
  std::vector<OptimTensor> ts = fused.table(first);
  cpu::sgd_step_multi(ts.data(), static_cast<int64_t>(ts.size()), sc);
  EXPECT_EQ(one.p, fused.p);
  EXPECT_EQ(one.b, fused.b);

  AdamConfig ac;
  ac.weight_decay = 1e-2;
  for (const OptimTensor& t : one.table(first))
    if (t.count > 0) cpu::adam_step(t.param, t.grad, t.buf, t.buf2, t.count, ac, 3);
  ts = fused.table(first);
  cpu::adam_step_multi(ts.data(), static_cast<int64_t>(ts.size()), ac, 3);
  EXPECT_EQ(one.p, fused.p);
  EXPECT_EQ(one.b, fused.b);
  EXPECT_EQ(one.b2, fused.b2);
}

}  // namespace
}  // namespace engine::kernels
