// kernels/testing/ops_elementwise.h: owns the memory-bound layer Ops of the case table:
// max_pool2d, relu, batch_norm2d (train), log_softmax + nll_loss, dropout and dropout2d, forward
// and backward, each checked against kernels/cpu/reference.h.
#pragma once
#include "kernels/cpu/activation.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/softmax.h"
#include "kernels/testing/check.h"

namespace engine::kernels::testing {

// x (N, C, H, W) -> y, arg (N, C, OH, OW); backward routes dy to dx (N, C, H, W).
class MaxPool2dOp : public Op {
 public:
  MaxPool2dOp(bool backward, const kernels::Pool2dShape& s)
      : backward_(backward),
        s_(s),
        x_(uniform(s.planes() * s.h * s.w, 21)),
        dy_(uniform(out(), 22)),
        y_(out()),
        dx_(x_.count()),
        arg_(out()) {
    if (backward_) kernels::ref::max_pool2d_forward(x_, y_, arg_, s_);
  }
  void run() override {
    if (backward_)
      kernels::cpu::max_pool2d_backward(dy_, arg_, dx_, s_);
    else
      kernels::cpu::max_pool2d_forward(x_, y_, arg_, s_);
  }
  CheckResult check() override {
    run();
    if (backward_) {
      Buffer<float> want(dx_.count());
      kernels::ref::max_pool2d_backward(dy_, arg_, want, s_);
      return compare("dx", dx_, want, want.count(), kExact);
    }
    Buffer<float> y(out());
    Buffer<int32_t> arg(out());
    kernels::ref::max_pool2d_forward(x_, y, arg, s_);
    return worst_of(
        {compare("y", y_, y, out(), kExact), compare_ints("arg", arg_.get(), arg.get(), out())});
  }
  double bytes() const override { return 4.0 * (x_.count() + 2 * out()); }

 private:
  int64_t out() const { return s_.planes() * s_.oh() * s_.ow(); }
  bool backward_;
  kernels::Pool2dShape s_;
  Buffer<float> x_, dy_, y_, dx_;
  Buffer<int32_t> arg_;
};

// y = max(x, 0); backward dx = dy where y > 0.
class ReluOp : public Op {
 public:
  ReluOp(bool backward, int64_t count)
      : backward_(backward),
        n_(count),
        x_(uniform(count, 31)),
        dy_(uniform(count, 32)),
        y_(count),
        dx_(count) {
    kernels::ref::relu_forward(x_, y_, n_);
  }
  void run() override {
    if (backward_)
      kernels::cpu::relu_backward(dy_, y_, dx_, n_);
    else
      kernels::cpu::relu_forward(x_, y_, n_);
  }
  CheckResult check() override {
    run();
    Buffer<float> want(n_);
    if (backward_) {
      kernels::ref::relu_backward(dy_, y_, want, n_);
      return compare("dx", dx_, want, n_, kExact);
    }
    kernels::ref::relu_forward(x_, want, n_);
    return compare("y", y_, want, n_, kExact);
  }
  double bytes() const override { return 4.0 * n_ * (backward_ ? 3 : 2); }

 private:
  bool backward_;
  int64_t n_;
  Buffer<float> x_, dy_, y_, dx_;
};

// Training-mode BatchNorm2d (momentum 0.1, eps 1e-5) with affine and running statistics.
class BatchNormTrainOp : public Op {
 public:
  BatchNormTrainOp(bool backward, const kernels::BatchNormShape& s)
      : backward_(backward),
        s_(s),
        x_(uniform(count(), 41, -2.f, 3.f)),
        dy_(uniform(count(), 42)),
        gamma_(uniform(s.c, 43, 0.5f, 1.5f)),
        beta_(uniform(s.c, 44)),
        y_(count()),
        dx_(count()),
        dgamma_(s.c),
        dbeta_(s.c),
        mean_(s.c),
        invstd_(s.c),
        rmean_(s.c),
        rvar_(s.c) {
    std::fill(rvar_.get(), rvar_.get() + s.c, 1.f);  // torch's initial running statistics
    kernels::cpu::batch_norm_train_forward(x_, gamma_, beta_, y_, mean_, invstd_, nullptr, nullptr,
                                           s_, kMomentum, kEps);
  }
  void run() override {
    namespace kc = kernels::cpu;
    if (backward_)
      kc::batch_norm_backward(dy_, x_, gamma_, mean_, invstd_, dx_, dgamma_, dbeta_, s_);
    else
      kc::batch_norm_train_forward(x_, gamma_, beta_, y_, mean_, invstd_, rmean_, rvar_, s_,
                                   kMomentum, kEps);
  }
  CheckResult check() override {
    const int64_t c = s_.c;
    std::vector<float> rm0 = rmean_.copy(), rv0 = rvar_.copy();
    run();
    Buffer<float> a(count()), b(c), d(c);
    if (backward_) {
      kernels::ref::batch_norm_backward(dy_, x_, gamma_, a, b, d, s_, kEps);
      return worst_of({compare("dx", dx_, a, count(), batch_norm_dx_tol(s_.n * s_.hw)),
                       compare("dgamma", dgamma_, b, c, kBatchNormTol),
                       compare("dbeta", dbeta_, d, c, kBatchNormTol)});
    }
    Buffer<float> invstd(c);
    kernels::ref::batch_norm_train_forward(x_, gamma_, beta_, a, b, invstd, rm0.data(), rv0.data(),
                                           s_, kMomentum, kEps);
    return worst_of({compare("y", y_, a, count(), kBatchNormTol),
                     compare("mean", mean_, b, c, kBatchNormTol),
                     compare("invstd", invstd_, invstd, c, kBatchNormTol),
                     compare("running_mean", rmean_, rm0.data(), c, kBatchNormTol),
                     compare("running_var", rvar_, rv0.data(), c, kBatchNormTol)});
  }
  double bytes() const override { return 4.0 * count() * (backward_ ? 3 : 2); }

 private:
  static constexpr float kMomentum = 0.1f, kEps = 1e-5f;
  int64_t count() const { return s_.n * s_.c * s_.hw; }
  bool backward_;
  kernels::BatchNormShape s_;
  Buffer<float> x_, dy_, gamma_, beta_, y_, dx_, dgamma_, dbeta_, mean_, invstd_, rmean_, rvar_;
};

// The models' batch norm, relu and max pool forward as one op (nn::batch_norm2d_pool on the
// CPU): batch statistics, then the affine inside the pooling pass. Checked against the references
// run one after another. (Its backward runs the max_pool2d and batch_norm2d_train kernels.)
class BatchNormPoolOp : public Op {
 public:
  explicit BatchNormPoolOp(const kernels::Pool2dShape& s)
      : s_(s),
        bs_{s.n, s.c, s.h * s.w},
        x_(uniform(in(), 51, -2.f, 3.f)),
        gamma_(uniform(s.c, 53, 0.5f, 1.5f)),
        beta_(uniform(s.c, 54)),
        alpha_(s.c),
        shift_(s.c),
        y_(out()),
        mean_(s.c),
        invstd_(s.c),
        rmean_(s.c),
        rvar_(s.c),
        arg_(out()) {
    std::fill(rvar_.get(), rvar_.get() + s.c, 1.f);  // torch's initial running statistics
  }
  void run() override { forward(rmean_, rvar_); }
  CheckResult check() override {
    namespace ref = kernels::ref;
    std::vector<float> rm0 = rmean_.copy(), rv0 = rvar_.copy();
    run();
    Buffer<float> bn(in()), mean(s_.c), invstd(s_.c), pooled(out()), y(out());
    Buffer<int32_t> arg(out());
    ref::batch_norm_train_forward(x_, gamma_, beta_, bn, mean, invstd, rm0.data(), rv0.data(), bs_,
                                  kMomentum, kEps);
    ref::max_pool2d_forward(bn, pooled, arg, s_);
    ref::relu_forward(pooled, y, out());
    return worst_of({compare("y", y_, y, out(), kBatchNormTol),
                     compare_ints("arg", arg_.get(), arg.get(), out()),
                     compare("running_mean", rmean_, rm0.data(), s_.c, kBatchNormTol),
                     compare("running_var", rvar_, rv0.data(), s_.c, kBatchNormTol)});
  }
  // x read twice (statistics; the second pass mostly from cache) and once to pool; y, arg written.
  double bytes() const override { return 4.0 * (3 * in() + 2 * out()); }

 private:
  static constexpr float kMomentum = 0.1f, kEps = 1e-5f;
  int64_t in() const { return s_.planes() * s_.h * s_.w; }
  int64_t out() const { return s_.planes() * s_.oh() * s_.ow(); }
  void forward(float* running_mean, float* running_var) {
    namespace kc = kernels::cpu;
    kc::batch_norm_train_stats(x_, mean_, invstd_, running_mean, running_var, bs_, kMomentum, kEps);
    for (int64_t c = 0; c < s_.c; ++c) {
      const kernels::BnAffine a = kernels::bn_affine(mean_[c], invstd_[c], gamma_[c], beta_[c]);
      alpha_[c] = a.alpha;
      shift_[c] = a.shift;
    }
    kc::max_pool2d_affine_forward(x_, alpha_, shift_, y_, arg_, s_, true);
  }
  kernels::Pool2dShape s_;
  kernels::BatchNormShape bs_;
  Buffer<float> x_, gamma_, beta_, alpha_, shift_, y_, mean_, invstd_, rmean_, rvar_;
  Buffer<int32_t> arg_;
};

// Forward: logp = log_softmax(x), loss = nll_loss(logp, target). Backward: dlogp of loss (dloss
// 1), then dx through log_softmax: the models' loss layer, both directions.
class LogSoftmaxNllOp : public Op {
 public:
  LogSoftmaxNllOp(bool backward, int64_t n, int64_t c)
      : backward_(backward),
        n_(n),
        c_(c),
        x_(uniform(n * c, 51, -4.f, 4.f)),
        logp_(n * c),
        dlogp_(n * c),
        dx_(n * c),
        target_(n) {
    for (int64_t i = 0; i < n; ++i) target_.get()[i] = (i * 7 + 3) % c;
    kernels::ref::log_softmax_forward(x_, logp_, n, c);
  }
  void run() override {
    namespace kc = kernels::cpu;
    if (backward_) {
      const float one = 1.f;
      kc::nll_loss_backward(&one, target_, dlogp_, n_, c_);
      kc::log_softmax_backward(dlogp_, logp_, dx_, n_, c_);
    } else {
      kc::log_softmax_forward(x_, logp_, n_, c_);
      kc::nll_loss_forward(logp_, target_, &loss_, n_, c_);
    }
  }
  CheckResult check() override {
    run();
    namespace kr = kernels::ref;
    Buffer<float> a(n_ * c_), b(n_ * c_);
    if (backward_) {
      kr::nll_loss_backward(1.f, target_, a, n_, c_);
      kr::log_softmax_backward(a, logp_, b, n_, c_);
      return worst_of({compare("dlogp", dlogp_, a, a.count(), kLossTol),
                       compare("dx", dx_, b, b.count(), kLossTol)});
    }
    kr::log_softmax_forward(x_, a, n_, c_);
    float loss = kr::nll_loss_forward(a, target_, n_, c_);
    return worst_of({compare("logp", logp_, a, a.count(), kLossTol),
                     compare("loss", &loss_, &loss, 1, kLossTol)});
  }
  // Forward: x in, logp out; backward: dlogp out and back in, logp in, dx out; targets.
  double bytes() const override { return 4.0 * n_ * c_ * (backward_ ? 4 : 2) + 8.0 * n_; }

 private:
  bool backward_;
  int64_t n_, c_;
  Buffer<float> x_, logp_, dlogp_, dx_;
  Buffer<int64_t> target_;
  float loss_ = 0.f;
};

// Dropout over count elements, or dropout2d over `planes` planes of plane_size (per-plane
// draws). Backward applies the same mask and scale to dy, so it is checked against the
// reference forward of dy. Elementwise dropout runs as training does: the forward keeps a
// one-byte mask, the backward reads it (dropout_forward_mask / dropout_backward_mask).
class DropoutOp : public Op {
 public:
  DropoutOp(bool backward, int64_t planes, int64_t plane_size, float p, bool per_plane)
      : backward_(backward),
        per_plane_(per_plane),
        planes_(planes),
        plane_(plane_size),
        p_(p),
        x_(uniform(planes * plane_size, 61)),
        y_(x_.count()),
        mask_(x_.count()) {
    kernels::cpu::dropout_mask(mask_, mask_.count(), p_, kSeed, kOffset);  // the forward's
  }
  void run() override {
    namespace kc = kernels::cpu;
    const int64_t n = x_.count();
    if (per_plane_ && backward_)
      kc::dropout2d_backward(x_, y_, planes_, plane_, p_, kSeed, kOffset);
    else if (per_plane_)
      kc::dropout2d_forward(x_, y_, planes_, plane_, p_, kSeed, kOffset);
    else if (backward_)
      kc::dropout_backward_mask(x_, mask_, y_, n, p_);
    else
      kc::dropout_forward_mask(x_, y_, mask_, n, p_, kSeed, kOffset);
  }
  CheckResult check() override {
    run();
    Buffer<float> want(x_.count());
    if (per_plane_)
      kernels::ref::dropout2d_forward(x_, want, planes_, plane_, p_, kSeed, kOffset);
    else
      kernels::ref::dropout_forward(x_, want, x_.count(), p_, kSeed, kOffset);
    return compare(backward_ ? "dx" : "y", y_, want, want.count(), kExact);
  }
  double bytes() const override { return (per_plane_ ? 8.0 : 9.0) * x_.count(); }

 private:
  static constexpr uint64_t kSeed = 1234, kOffset = 77;
  bool backward_, per_plane_;
  int64_t planes_, plane_;
  float p_;
  Buffer<float> x_, y_;
  Buffer<uint8_t> mask_;
};

}  // namespace engine::kernels::testing
