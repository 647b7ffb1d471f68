// kernels/testing/ops_optim.h: owns the update Ops of the case table: SGD and Adam steps over
// every parameter tensor of a model (one kernel call per tensor, as nn/optim does) and the ring's
// reduce step dst += src (kernels/cpu/reduce.h), checked against kernels/cpu/reference.h.
#pragma once
#include "kernels/cpu/optim.h"
#include "kernels/cpu/reduce.h"
#include "kernels/testing/check.h"

namespace engine::kernels::testing {

// One buffer per parameter tensor, sizes as the model's.
struct ParamSet {
  std::vector<Buffer<float>> t;
  ParamSet(const std::vector<int64_t>& counts, uint64_t seed, float lo, float hi) {
    for (size_t i = 0; i < counts.size(); ++i) t.push_back(uniform(counts[i], seed + i, lo, hi));
  }
  int64_t total() const {
    int64_t n = 0;
    for (auto& b : t) n += b.count();
    return n;
  }
  std::vector<std::vector<float>> copy() const {
    std::vector<std::vector<float>> c;
    for (auto& b : t) c.push_back(b.copy());
    return c;
  }
};

// Compares each tensor of got against want; the worst over all of them.
inline CheckResult compare_set(const std::string& what, const ParamSet& got,
                               std::vector<std::vector<float>>& want, double tol) {
  std::vector<CheckResult> rs;
  for (size_t i = 0; i < want.size(); ++i)
    rs.push_back(compare(what + "[" + std::to_string(i) + "]", got.t[i], want[i].data(),
                         got.t[i].count(), tol));
  return worst_of(rs);
}

// torch.optim.SGD with the tutorials' lr 0.01 and momentum 0.5, a step after the first (the
// momentum buffer exists).
class SgdOp : public Op {
 public:
  explicit SgdOp(const std::vector<int64_t>& counts)
      : p_(counts, 100, -1.f, 1.f), g_(counts, 200, -1.f, 1.f), buf_(counts, 300, -1.f, 1.f) {
    cfg_.lr = 0.01;
    cfg_.momentum = 0.5;
  }
  void run() override {
    for (size_t i = 0; i < p_.t.size(); ++i)
      kernels::cpu::sgd_step(p_.t[i], g_.t[i], buf_.t[i], p_.t[i].count(), cfg_, false);
  }
  CheckResult check() override {
    auto p = p_.copy(), buf = buf_.copy();
    run();
    for (size_t i = 0; i < p.size(); ++i)
      kernels::ref::sgd_step(p[i].data(), g_.t[i], buf[i].data(), p_.t[i].count(), cfg_, false);
    return worst_of(
        {compare_set("param", p_, p, kSgdTol), compare_set("momentum", buf_, buf, kSgdTol)});
  }
  double bytes() const override { return 4.0 * 5 * p_.total(); }  // p, buf read+write; g read

 private:
  ParamSet p_, g_, buf_;
  kernels::SgdConfig cfg_;
};

// torch.optim.Adam with its defaults (lr 1e-3, betas 0.9, 0.999, eps 1e-8), at step 10.
class AdamOp : public Op {
 public:
  explicit AdamOp(const std::vector<int64_t>& counts)
      : p_(counts, 400, -1.f, 1.f),
        g_(counts, 500, -1.f, 1.f),
        m_(counts, 600, -0.1f, 0.1f),
        v_(counts, 700, 0.f, 0.01f) {}
  void run() override {
    for (size_t i = 0; i < p_.t.size(); ++i)
      kernels::cpu::adam_step(p_.t[i], g_.t[i], m_.t[i], v_.t[i], p_.t[i].count(), cfg_, kStep);
  }
  CheckResult check() override {
    auto p = p_.copy(), m = m_.copy(), v = v_.copy();
    run();
    for (size_t i = 0; i < p.size(); ++i)
      kernels::ref::adam_step(p[i].data(), g_.t[i], m[i].data(), v[i].data(), p_.t[i].count(), cfg_,
                              kStep);
    return worst_of({compare_set("param", p_, p, kAdamTol), compare_set("m", m_, m, kAdamTol),
                     compare_set("v", v_, v, kAdamTol)});
  }
  double bytes() const override { return 4.0 * 7 * p_.total(); }  // p, m, v read+write; g read

 private:
  static constexpr int64_t kStep = 10;
  ParamSet p_, g_, m_, v_;
  kernels::AdamConfig cfg_;
};

// dst[i] += src[i] for i < count, on the calling thread.
using ReduceSumFn = void (*)(float* dst, const float* src, int64_t count);

inline void kernels_reduce_sum(float* dst, const float* src, int64_t count) {
  kernels::cpu::reduce_into(dst, src, count, kernels::ReduceOp::Sum);
}

// The ring's reduce step dst += src over count floats: kernels/cpu/reduce.h by default; the
// bench also times comm/base/reduce.h's, which the transports call.
class ReduceSumOp : public Op {
 public:
  explicit ReduceSumOp(int64_t count, ReduceSumFn fn = kernels_reduce_sum)
      : n_(count), fn_(fn), dst_(uniform(count, 81)), src_(uniform(count, 82)) {}
  void run() override { fn_(dst_, src_, n_); }
  CheckResult check() override {
    std::vector<float> want = dst_.copy();
    run();
    for (int64_t i = 0; i < n_; ++i) want[i] += src_.get()[i];
    return compare("dst", dst_, want.data(), n_, kExact);
  }
  double bytes() const override { return 12.0 * n_; }  // dst read+write, src read

 private:
  int64_t n_;
  ReduceSumFn fn_;
  Buffer<float> dst_, src_;
};

}  // namespace engine::kernels::testing
