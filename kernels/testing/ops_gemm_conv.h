// kernels/testing/ops_gemm_conv.h: owns the GEMM-shaped Ops: linear (kernels/cpu/linear.h)
// and conv2d (kernels/cpu/conv2d/conv2d.h), forward and both backward products, checked against
// ref::; in bf16 (kernels/cpu/bf16_ops.h) too, checked against ref:: on the operands rounded to
// bf16 (bf16 products are exact in fp32, so only the summation order may differ).
#pragma once
#include <algorithm>
#include <limits>
#include <memory>

#include "kernels/cpu/bf16_ops.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/pool.h"
#include "kernels/testing/check.h"

namespace engine::kernels::testing {

// Forward, the input gradient, the weight gradient: of linear and conv2d alike.
using kernels::cpu::ConvPass;

inline const char* pass_name(ConvPass p) {
  switch (p) {
    case ConvPass::Forward:
      return "fwd";
    case ConvPass::BackwardInput:
      return "bwd_data";
    case ConvPass::BackwardWeight:
      return "bwd_weight";
  }
  return "?";
}

// src rounded to bf16 (what the bf16 kernels multiply), for the reference.
inline Buffer<float> rounded(const Buffer<float>& src) {
  Buffer<float> r(src.count());
  kernels::cpu::round_to_bf16(src, r, src.count());
  return r;
}

// x (N, in), w (out, in), b (out), dy (N, out). Backward weight runs with beta 0, as training.
class LinearOp : public Op {
 public:
  LinearOp(ConvPass pass, const kernels::LinearShape& s, Precision prec = Precision::FP32)
      : pass_(pass),
        s_(s),
        prec_(prec),
        x_(uniform(s.n * s.in, 1)),
        w_(uniform(s.out * s.in, 2)),
        b_(uniform(s.out, 3)),
        dy_(uniform(s.n * s.out, 4)),
        y_(s.n * s.out),
        dx_(s.n * s.in),
        dw_(s.out * s.in) {}

  void run() override {
    namespace kc = kernels::cpu;
    if (prec_ == Precision::BF16) return run_bf16();
    switch (pass_) {
      case ConvPass::Forward:
        kc::linear_forward(x_, w_, b_, y_, s_);
        break;
      case ConvPass::BackwardInput:
        kc::linear_backward_data(dy_, w_, dx_, s_);
        break;
      case ConvPass::BackwardWeight:
        kc::linear_backward_weight(dy_, x_, dw_, s_, 0.f);
        break;
    }
  }

  CheckResult check() override {
    run();
    const bool bf16 = prec_ == Precision::BF16;
    Buffer<float> x = bf16 ? rounded(x_) : Buffer<float>(),
                  w = bf16 ? rounded(w_) : Buffer<float>(),
                  dy = bf16 ? rounded(dy_) : Buffer<float>();
    const float *xr = bf16 ? x.get() : x_.get(), *wr = bf16 ? w.get() : w_.get(),
                *dyr = bf16 ? dy.get() : dy_.get();
    if (pass_ == ConvPass::Forward) {
      Buffer<float> want(s_.n * s_.out);
      kernels::ref::linear_forward(xr, wr, b_, want, s_);
      return compare("y", y_, want, want.count(), sum_tol(s_.in));
    }
    Buffer<float> dx(s_.n * s_.in), dw(s_.out * s_.in), db(s_.out);
    kernels::ref::linear_backward(xr, wr, dyr, dx, dw, db, s_);
    if (pass_ == ConvPass::BackwardInput)
      return compare("dx", dx_, dx, dx.count(), sum_tol(s_.out));
    return compare("dw", dw_, dw, dw.count(), sum_tol(s_.n));
  }

  double flops() const override { return 2.0 * s_.n * s_.in * s_.out; }
  double bytes() const override {
    double x = s_.n * s_.in, w = s_.out * s_.in, y = s_.n * s_.out;
    return 4.0 * (pass_ == ConvPass::Forward ? x + w + s_.out + y : x + w + y);
  }

 private:
  void run_bf16() {
    namespace kc = kernels::cpu;
    switch (pass_) {
      case ConvPass::Forward:
        kc::linear_forward_bf16(x_, w_, b_, y_, s_);
        break;
      case ConvPass::BackwardInput:
        kc::linear_backward_data_bf16(dy_, w_, dx_, s_);
        break;
      case ConvPass::BackwardWeight:
        kc::linear_backward_weight_bf16(dy_, x_, dw_, s_, 0.f);
        break;
    }
  }

  ConvPass pass_;
  kernels::LinearShape s_;
  Precision prec_;
  Buffer<float> x_, w_, b_, dy_, y_, dx_, dw_;
};

// x (N, Cin, H, W), w (Cout, Cin, KH, KW), b (Cout), dy (N, Cout, OH, OW). Backward weight is
// the filter gradient with the bias gradient fused (beta 0), as training calls it.
class Conv2dOp : public Op {
 public:
  Conv2dOp(ConvPass pass, const kernels::Conv2dShape& s,
           kernels::cpu::ConvAlgo algo = kernels::cpu::ConvAlgo::Auto,
           Precision prec = Precision::FP32)
      : pass_(pass),
        s_(s),
        algo_(algo),
        prec_(prec),
        x_(uniform(s.x_count(), 11)),
        w_(uniform(s.w_count(), 12)),
        b_(uniform(s.c_out, 13)),
        dy_(uniform(s.y_count(), 14)),
        y_(s.y_count()),
        dx_(s.x_count()),
        dw_(s.w_count()),
        db_(s.c_out),
        ws_(kernels::cpu::conv2d_workspace_count(s, algo)) {
    // NaN workspace: a kernel that reads workspace it did not write shows up in check().
    std::fill_n(ws_.get(), ws_.count(), std::numeric_limits<float>::quiet_NaN());
  }

  void run() override {
    namespace kc = kernels::cpu;
    if (prec_ == Precision::BF16) return run_bf16();
    switch (pass_) {
      case ConvPass::Forward:
        kc::conv2d_forward(x_, w_, b_, y_, s_, ws_, ws_.count(), algo_);
        break;
      case ConvPass::BackwardInput:
        kc::conv2d_backward_input(dy_, w_, dx_, s_, ws_, ws_.count(), algo_);
        break;
      case ConvPass::BackwardWeight:
        kc::conv2d_backward_weight(x_, dy_, dw_, db_, s_, 0.f, ws_, ws_.count(), algo_);
        break;
    }
  }

  CheckResult check() override {
    run();
    namespace kr = kernels::ref;
    const bool bf16 = prec_ == Precision::BF16;
    Buffer<float> x = bf16 ? rounded(x_) : Buffer<float>(),
                  w = bf16 ? rounded(w_) : Buffer<float>(),
                  dy = bf16 ? rounded(dy_) : Buffer<float>();
    const float *xr = bf16 ? x.get() : x_.get(), *wr = bf16 ? w.get() : w_.get(),
                *dyr = bf16 ? dy.get() : dy_.get();
    switch (pass_) {
      case ConvPass::Forward: {
        Buffer<float> want(s_.y_count());
        kr::conv2d_forward(xr, wr, b_, want, s_);
        return compare("y", y_, want, want.count(), sum_tol(s_.k()));
      }
      case ConvPass::BackwardInput: {
        Buffer<float> want(s_.x_count());
        kr::conv2d_backward_input(dyr, wr, want, s_);
        return compare("dx", dx_, want, want.count(), sum_tol(s_.c_out * s_.kh * s_.kw));
      }
      case ConvPass::BackwardWeight:
        break;
    }
    Buffer<float> dw(s_.w_count()), db(s_.c_out);
    kr::conv2d_backward_weight(xr, dyr, dw, s_);
    kr::conv2d_backward_bias(dy_, db, s_);  // fp32 in both precisions
    const int64_t k = s_.n * s_.oh() * s_.ow();
    return worst_of({compare("dw", dw_, dw, dw.count(), sum_tol(k)),
                     compare("db", db_, db, db.count(), sum_tol(k))});
  }

  double flops() const override { return 2.0 * s_.y_count() * s_.k(); }
  double bytes() const override {
    return 4.0 * (s_.x_count() + s_.w_count() + s_.y_count() + s_.c_out);
  }

 private:
  void run_bf16() {
    namespace kc = kernels::cpu;
    switch (pass_) {
      case ConvPass::Forward:
        kc::conv2d_forward_bf16(x_, w_, b_, y_, s_);
        break;
      case ConvPass::BackwardInput:
        kc::conv2d_backward_input_bf16(dy_, w_, dx_, s_);
        break;
      case ConvPass::BackwardWeight:
        kc::conv2d_backward_weight_bf16(x_, dy_, dw_, db_, s_, 0.f);
        break;
    }
  }

  ConvPass pass_;
  kernels::Conv2dShape s_;
  kernels::cpu::ConvAlgo algo_;
  Precision prec_;
  Buffer<float> x_, w_, b_, dy_, y_, dx_, dw_, db_, ws_;
};

// A first layer's convolution and the relu + 2x2 max pool after it as one op
// (kernels::cpu::conv2d_pool_forward): checked against the reference convolution, max pool and
// relu run one after another. Timed with the convolution's FLOPs.
class Conv2dPoolOp : public Op {
 public:
  explicit Conv2dPoolOp(const kernels::Conv2dShape& s)
      : s_(s),
        ps_{s.n, s.c_out, s.oh(), s.ow(), 2, 2},
        x_(uniform(s.x_count(), 61)),
        w_(uniform(s.w_count(), 62, -0.3f, 0.3f)),
        b_(uniform(s.c_out, 63)),
        y_(out()),
        arg_(out()) {}
  void run() override { kernels::cpu::conv2d_pool_forward(x_, w_, b_, y_, arg_, s_, ps_, true); }
  CheckResult check() override {
    run();
    Buffer<float> conv(s_.y_count()), pooled(out()), y(out());
    Buffer<int32_t> arg(out());
    kernels::ref::conv2d_forward(x_, w_, b_, conv, s_);
    kernels::ref::max_pool2d_forward(conv, pooled, arg, ps_);
    kernels::ref::relu_forward(pooled, y, out());
    // y only: a near tie in a window may pick the other argmax within rounding.
    return compare("y", y_, y, out(), sum_tol(s_.k()));
  }
  double flops() const override { return 2.0 * s_.y_count() * s_.k(); }
  double bytes() const override { return 4.0 * (s_.x_count() + 2 * out()); }

 private:
  int64_t out() const { return ps_.planes() * ps_.oh() * ps_.ow(); }
  kernels::Conv2dShape s_;
  kernels::Pool2dShape ps_;
  Buffer<float> x_, w_, b_, y_;
  Buffer<int32_t> arg_;
};

}  // namespace engine::kernels::testing
