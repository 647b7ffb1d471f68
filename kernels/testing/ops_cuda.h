// kernels/testing/ops_cuda.h: owns the CUDA Ops of the kernel-case table (table.h): the same
// cases as the CPU Ops (ops_gemm_conv.h, ops_elementwise.h, ops_optim.h), with the same inputs
// (same seeds), on one device through kernels/cuda/ops.h. Each check() runs the kernel on the
// device, copies the outputs back and compares them with kernels/cpu/reference.h on the host
// inputs; run() only queues the kernel on the device's compute stream (the caller synchronises).
// Header-only and kernels/ + core/ only; in a build without CUDA it compiles too, and every call
// throws engine::Error.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_backend.h"
#include "core/device.h"
#include "kernels/cuda/ops.h"
#include "kernels/testing/check.h"
#include "kernels/testing/ops_elementwise.h"
#include "kernels/testing/ops_gemm_conv.h"
#include "kernels/testing/ops_optim.h"

namespace engine::kernels::testing {

// Tolerances of the device kernels against the double reference (relative to max |want|, as the
// CPU's). cuBLAS runs in CUBLAS_DEFAULT_MATH (plain FP32 FMA, never TF32; bench_kernels checks
// the handle's mode at start) but may split K and sum in another order: twice the CPU's.
// cuDNN runs CUDNN_FMA_MATH (FP32, no TF32), but its fastest deterministic algorithm may be
// Winograd or FFT, which transform the operands and round more: 8x the CPU's, at least 1e-4.
// Either is still far below what a wrong index or a missed element gives (errors of order 1),
// and below TF32's rounding (about 1e-3 relative per product).
inline double cublas_tol(int64_t k) {
  return 2.0 * sum_tol(k);
}
inline double cudnn_tol(int64_t k) {
  return std::max(8.0 * sum_tol(k), 1e-4);
}
// Fixed-order block reductions (the bias gradient): another order of summation than the CPU's.
inline double device_sum_tol(int64_t k) {
  return 2.0 * sum_tol(k);
}
// Batch norm sums in double on the device but divides and takes square roots in float; the
// loss layer's expf / logf are CUDA's (within 2 ulp); the optimizers may contract to FMA
// differently from the CPU kernels: twice the CPU tolerances. relu, max-pool, dropout (same
// Philox masks) and the reduce step are exact, as on the CPU.
constexpr double kDeviceBatchNormTol = 2 * kBatchNormTol;
constexpr double kDeviceLossTol = 2 * kLossTol;
constexpr double kDeviceSgdTol = 2 * kSgdTol;
constexpr double kDeviceAdamTol = 2 * kAdamTol;

// count elements of T in the device memory of cuda:`device` (the engine's caching allocator).
// Uninitialised until written.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, int64_t count)
      : device_(device),
        count_(count),
        nbytes_(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)),
        p_(static_cast<T*>(engine::cuda::alloc(device, nbytes_))) {}
  // A copy of host[0, count).
  DeviceBuffer(int device, const T* host, int64_t count) : DeviceBuffer(device, count) {
    upload(host);
  }
  explicit DeviceBuffer(int device, const Buffer<T>& host)
      : DeviceBuffer(device, host.get(), host.count()) {}
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  operator T*() const { return p_; }  // NOLINT: buffers pass straight to kernel signatures
  int64_t count() const { return count_; }

  // Host -> device (returns once host may be reused; ordered with the compute stream).
  void upload(const T* host) {
    if (count_ > 0)
      engine::cuda::copy(p_, Device::cuda(device_), host, Device::cpu(), count_ * sizeof(T));
  }
  // Device -> host, after the work queued on the compute stream.
  void download(T* host) const {
    if (count_ > 0)
      engine::cuda::copy(host, Device::cpu(), p_, Device::cuda(device_), count_ * sizeof(T));
  }
  Buffer<T> to_host() const {
    Buffer<T> b(count_);
    download(b);
    return b;
  }
  // Fills with NaN bits (queued on the compute stream): an output the kernel fails to write
  // shows up as an infinite error, not as a stale value that happens to be right.
  void poison() {
    static_assert(sizeof(T) % sizeof(float) == 0, "poison() fills whole floats");
    const int64_t floats = count_ * static_cast<int64_t>(sizeof(T) / sizeof(float));
    if (floats > 0)
      engine::cuda::fill_f32(device_, reinterpret_cast<float*>(p_),
                             std::numeric_limits<float>::quiet_NaN(), floats);
  }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(count_, o.count_);
    std::swap(nbytes_, o.nbytes_);
    std::swap(p_, o.p_);
  }
  void release() noexcept {
    if (!p_) return;
    try {
      engine::cuda::free(device_, p_, nbytes_);
    } catch (const std::exception&) {
      // the block stays with the driver; nothing else to do in a destructor
    }
    p_ = nullptr;
  }
  int device_ = -1;
  int64_t count_ = 0;
  size_t nbytes_ = 0;
  T* p_ = nullptr;
};

// x (N, in), w (out, in), b (out), dy (N, out), as LinearOp; cuBLAS SGEMM. In bf16 (the
// engine's only, so far): checked against ref:: on the operands rounded to bf16, as LinearOp.
class CudaLinearOp : public Op {
 public:
  CudaLinearOp(int device, ConvPass pass, const kernels::LinearShape& s,
               Precision prec = Precision::FP32)
      : dev_(device),
        pass_(pass),
        s_(s),
        bf16_(prec == Precision::BF16),
        hx_(uniform(s.n * s.in, 1)),
        hw_(uniform(s.out * s.in, 2)),
        hb_(uniform(s.out, 3)),
        hdy_(uniform(s.n * s.out, 4)),
        x_(device, hx_),
        w_(device, hw_),
        b_(device, hb_),
        dy_(device, hdy_),
        y_(device, s.n * s.out),
        dx_(device, s.n * s.in),
        dw_(device, s.out * s.in) {}

  void run() override {
    namespace kg = kernels::cuda;
    switch (pass_) {
      case ConvPass::Forward:
        (bf16_ ? kg::linear_forward_bf16 : kg::linear_forward)(dev_, x_, w_, b_, y_, s_);
        break;
      case ConvPass::BackwardInput:
        (bf16_ ? kg::linear_backward_data_bf16 : kg::linear_backward_data)(dev_, dy_, w_, dx_, s_);
        break;
      case ConvPass::BackwardWeight:
        (bf16_ ? kg::linear_backward_weight_bf16 : kg::linear_backward_weight)(dev_, dy_, x_, dw_,
                                                                               s_, 0.f);
        break;
    }
  }

  CheckResult check() override {
    y_.poison();
    dx_.poison();
    dw_.poison();
    run();
    Buffer<float> x = bf16_ ? rounded(hx_) : Buffer<float>(),
                  w = bf16_ ? rounded(hw_) : Buffer<float>(),
                  dy = bf16_ ? rounded(hdy_) : Buffer<float>();
    const float *xr = bf16_ ? x.get() : hx_.get(), *wr = bf16_ ? w.get() : hw_.get(),
                *dyr = bf16_ ? dy.get() : hdy_.get();
    if (pass_ == ConvPass::Forward) {
      Buffer<float> want(s_.n * s_.out);
      kernels::ref::linear_forward(xr, wr, hb_, want, s_);
      return compare("y", y_.to_host(), want, want.count(), cublas_tol(s_.in));
    }
    Buffer<float> dx(s_.n * s_.in), dw(s_.out * s_.in), db(s_.out);
    kernels::ref::linear_backward(xr, wr, dyr, dx, dw, db, s_);
    if (pass_ == ConvPass::BackwardInput)
      return compare("dx", dx_.to_host(), dx, dx.count(), cublas_tol(s_.out));
    return compare("dw", dw_.to_host(), dw, dw.count(), cublas_tol(s_.n));
  }

  double flops() const override { return 2.0 * s_.n * s_.in * s_.out; }
  double bytes() const override {
    double x = s_.n * s_.in, w = s_.out * s_.in, y = s_.n * s_.out;
    return 4.0 * (pass_ == ConvPass::Forward ? x + w + s_.out + y : x + w + y);
  }

 private:
  int dev_;
  ConvPass pass_;
  kernels::LinearShape s_;
  bool bf16_;
  Buffer<float> hx_, hw_, hb_, hdy_;
  DeviceBuffer<float> x_, w_, b_, dy_, y_, dx_, dw_;
};

// As Conv2dOp, on cuDNN (its algorithm is found on the first call: in check(), before timing).
// Backward weight is the filter and the bias gradient in one call (beta 0), as training calls it.
class CudaConv2dOp : public Op {
 public:
  CudaConv2dOp(int device, ConvPass pass, const kernels::Conv2dShape& s,
               Precision prec = Precision::FP32)
      : dev_(device),
        pass_(pass),
        s_(s),
        bf16_(prec == Precision::BF16),
        hx_(uniform(s.x_count(), 11)),
        hw_(uniform(s.w_count(), 12)),
        hb_(uniform(s.c_out, 13)),
        hdy_(uniform(s.y_count(), 14)),
        x_(device, hx_),
        w_(device, hw_),
        b_(device, hb_),
        dy_(device, hdy_),
        y_(device, s.y_count()),
        dx_(device, s.x_count()),
        dw_(device, s.w_count()),
        db_(device, s.c_out) {}

  void run() override {
    namespace kg = kernels::cuda;
    switch (pass_) {
      case ConvPass::Forward:
        (bf16_ ? kg::conv2d_forward_bf16 : kg::conv2d_forward)(dev_, x_, w_, b_, y_, s_);
        break;
      case ConvPass::BackwardInput:
        (bf16_ ? kg::conv2d_backward_input_bf16 : kg::conv2d_backward_input)(dev_, dy_, w_, dx_,
                                                                             s_);
        break;
      case ConvPass::BackwardWeight:
        (bf16_ ? kg::conv2d_backward_weight_bf16 : kg::conv2d_backward_weight)(dev_, x_, dy_, dw_,
                                                                               db_, s_, 0.f);
        break;
    }
  }

  CheckResult check() override {
    y_.poison();
    dx_.poison();
    dw_.poison();
    db_.poison();
    run();
    namespace kr = kernels::ref;
    Buffer<float> x = bf16_ ? rounded(hx_) : Buffer<float>(),
                  w = bf16_ ? rounded(hw_) : Buffer<float>(),
                  dy = bf16_ ? rounded(hdy_) : Buffer<float>();
    const float *xr = bf16_ ? x.get() : hx_.get(), *wr = bf16_ ? w.get() : hw_.get(),
                *dyr = bf16_ ? dy.get() : hdy_.get();
    switch (pass_) {
      case ConvPass::Forward: {
        Buffer<float> want(s_.y_count());
        kr::conv2d_forward(xr, wr, hb_, want, s_);
        return compare("y", y_.to_host(), want, want.count(), cudnn_tol(s_.k()));
      }
      case ConvPass::BackwardInput: {
        Buffer<float> want(s_.x_count());
        kr::conv2d_backward_input(dyr, wr, want, s_);
        return compare("dx", dx_.to_host(), want, want.count(),
                       cudnn_tol(s_.c_out * s_.kh * s_.kw));
      }
      case ConvPass::BackwardWeight:
        break;
    }
    Buffer<float> dw(s_.w_count()), db(s_.c_out);
    kr::conv2d_backward_weight(xr, dyr, dw, s_);
    kr::conv2d_backward_bias(hdy_, db, s_);  // fp32 in both precisions
    const int64_t k = s_.n * s_.oh() * s_.ow();
    return worst_of({compare("dw", dw_.to_host(), dw, dw.count(), cudnn_tol(k)),
                     compare("db", db_.to_host(), db, db.count(), device_sum_tol(k))});
  }

  double flops() const override { return 2.0 * s_.y_count() * s_.k(); }
  double bytes() const override {
    return 4.0 * (s_.x_count() + s_.w_count() + s_.y_count() + s_.c_out);
  }

 private:
  int dev_;
  ConvPass pass_;
  kernels::Conv2dShape s_;
  bool bf16_;
  Buffer<float> hx_, hw_, hb_, hdy_;
  DeviceBuffer<float> x_, w_, b_, dy_, y_, dx_, dw_, db_;
};

// As MaxPool2dOp: the backward's indices come from the reference forward on the host.
class CudaMaxPool2dOp : public Op {
 public:
  CudaMaxPool2dOp(int device, bool backward, const kernels::Pool2dShape& s)
      : dev_(device),
        backward_(backward),
        s_(s),
        hx_(uniform(s.planes() * s.h * s.w, 21)),
        hdy_(uniform(out(), 22)),
        harg_(out()),
        x_(device, hx_),
        dy_(device, hdy_),
        y_(device, out()),
        dx_(device, hx_.count()),
        arg_(device, out()) {
    if (backward_) {
      Buffer<float> y(out());
      kernels::ref::max_pool2d_forward(hx_, y, harg_, s_);
      arg_.upload(harg_);
    }
  }
  void run() override {
    if (backward_)
      kernels::cuda::max_pool2d_backward(dev_, dy_, arg_, dx_, s_);
    else
      kernels::cuda::max_pool2d_forward(dev_, x_, y_, arg_, s_);
  }
  CheckResult check() override {
    if (backward_) {
      dx_.poison();
      run();
      Buffer<float> want(dx_.count());
      kernels::ref::max_pool2d_backward(hdy_, harg_, want, s_);
      return compare("dx", dx_.to_host(), want, want.count(), kExact);
    }
    y_.poison();
    arg_.poison();
    run();
    Buffer<float> y(out());
    Buffer<int32_t> arg(out());
    kernels::ref::max_pool2d_forward(hx_, y, arg, s_);
    return worst_of({compare("y", y_.to_host(), y, out(), kExact),
                     compare_ints("arg", arg_.to_host().get(), arg.get(), out())});
  }
  double bytes() const override { return 4.0 * (hx_.count() + 2 * out()); }

 private:
  int64_t out() const { return s_.planes() * s_.oh() * s_.ow(); }
  int dev_;
  bool backward_;
  kernels::Pool2dShape s_;
  Buffer<float> hx_, hdy_;
  Buffer<int32_t> harg_;
  DeviceBuffer<float> x_, dy_, y_, dx_;
  DeviceBuffer<int32_t> arg_;
};

// As ReluOp: the backward's y comes from the reference forward.
class CudaReluOp : public Op {
 public:
  CudaReluOp(int device, bool backward, int64_t count)
      : dev_(device),
        backward_(backward),
        n_(count),
        hx_(uniform(count, 31)),
        hdy_(uniform(count, 32)),
        hy_(count),
        x_(device, hx_),
        dy_(device, hdy_),
        y_(device, count),
        dx_(device, count) {
    kernels::ref::relu_forward(hx_, hy_, n_);
    y_.upload(hy_);
  }
  void run() override {
    if (backward_)
      kernels::cuda::relu_backward(dev_, dy_, y_, dx_, n_);
    else
      kernels::cuda::relu_forward(dev_, x_, y_, n_);
  }
  CheckResult check() override {
    Buffer<float> want(n_);
    if (backward_) {
      dx_.poison();
      run();
      kernels::ref::relu_backward(hdy_, hy_, want, n_);
      return compare("dx", dx_.to_host(), want, n_, kExact);
    }
    y_.poison();
    run();
    kernels::ref::relu_forward(hx_, want, n_);
    return compare("y", y_.to_host(), want, n_, kExact);
  }
  double bytes() const override { return 4.0 * n_ * (backward_ ? 3 : 2); }

 private:
  int dev_;
  bool backward_;
  int64_t n_;
  Buffer<float> hx_, hdy_, hy_;
  DeviceBuffer<float> x_, dy_, y_, dx_;
};

// As BatchNormTrainOp (momentum 0.1, eps 1e-5); the backward's saved statistics come from the
// CPU kernel, as the CPU Op's.
class CudaBatchNormTrainOp : public Op {
 public:
  CudaBatchNormTrainOp(int device, bool backward, const kernels::BatchNormShape& s)
      : dev_(device),
        backward_(backward),
        s_(s),
        hx_(uniform(count(), 41, -2.f, 3.f)),
        hdy_(uniform(count(), 42)),
        hgamma_(uniform(s.c, 43, 0.5f, 1.5f)),
        hbeta_(uniform(s.c, 44)),
        hrm_(s.c),
        hrv_(s.c),
        x_(device, hx_),
        dy_(device, hdy_),
        gamma_(device, hgamma_),
        beta_(device, hbeta_),
        y_(device, count()),
        dx_(device, count()),
        dgamma_(device, s.c),
        dbeta_(device, s.c),
        mean_(device, s.c),
        invstd_(device, s.c),
        rmean_(device, s.c),
        rvar_(device, s.c) {
    std::fill(hrv_.get(), hrv_.get() + s.c, 1.f);  // torch's initial running statistics
    rmean_.upload(hrm_);
    rvar_.upload(hrv_);
    Buffer<float> y(count()), mean(s.c), invstd(s.c);
    kernels::cpu::batch_norm_train_forward(hx_, hgamma_, hbeta_, y, mean, invstd, nullptr, nullptr,
                                           s_, kMomentum, kEps);
    mean_.upload(mean);
    invstd_.upload(invstd);
  }
  void run() override {
    namespace kg = kernels::cuda;
    if (backward_)
      kg::batch_norm_backward(dev_, dy_, x_, gamma_, mean_, invstd_, dx_, dgamma_, dbeta_, s_);
    else
      kg::batch_norm_train_forward(dev_, x_, gamma_, beta_, y_, mean_, invstd_, rmean_, rvar_, s_,
                                   kMomentum, kEps);
  }
  CheckResult check() override {
    const int64_t c = s_.c;
    Buffer<float> a(count()), b(c), d(c);
    constexpr double tol = kDeviceBatchNormTol;
    if (backward_) {
      dx_.poison();
      dgamma_.poison();
      dbeta_.poison();
      run();
      kernels::ref::batch_norm_backward(hdy_, hx_, hgamma_, a, b, d, s_, kEps);
      return worst_of({compare("dx", dx_.to_host(), a, count(), tol),
                       compare("dgamma", dgamma_.to_host(), b, c, tol),
                       compare("dbeta", dbeta_.to_host(), d, c, tol)});
    }
    // The running statistics on the device are still the initial ones (hrm_, hrv_).
    std::vector<float> rm = hrm_.copy(), rv = hrv_.copy();
    y_.poison();
    mean_.poison();
    invstd_.poison();
    run();
    Buffer<float> invstd(c);
    kernels::ref::batch_norm_train_forward(hx_, hgamma_, hbeta_, a, b, invstd, rm.data(), rv.data(),
                                           s_, kMomentum, kEps);
    return worst_of({compare("y", y_.to_host(), a, count(), tol),
                     compare("mean", mean_.to_host(), b, c, tol),
                     compare("invstd", invstd_.to_host(), invstd, c, tol),
                     compare("running_mean", rmean_.to_host(), rm.data(), c, tol),
                     compare("running_var", rvar_.to_host(), rv.data(), c, tol)});
  }
  double bytes() const override { return 4.0 * count() * (backward_ ? 3 : 2); }

 private:
  static constexpr float kMomentum = 0.1f, kEps = 1e-5f;
  int64_t count() const { return s_.n * s_.c * s_.hw; }
  int dev_;
  bool backward_;
  kernels::BatchNormShape s_;
  Buffer<float> hx_, hdy_, hgamma_, hbeta_, hrm_, hrv_;
  DeviceBuffer<float> x_, dy_, gamma_, beta_, y_, dx_, dgamma_, dbeta_, mean_, invstd_, rmean_,
      rvar_;
};

// As LogSoftmaxNllOp. The loss is a device scalar; nll_loss_forward waits for the device (it
// checks the targets, as the CPU kernel does), so the forward's time includes that round trip,
// as it does in training. The backward's dloss (1) is a device scalar too.
class CudaLogSoftmaxNllOp : public Op {
 public:
  CudaLogSoftmaxNllOp(int device, bool backward, int64_t n, int64_t c)
      : dev_(device),
        backward_(backward),
        n_(n),
        c_(c),
        hx_(uniform(n * c, 51, -4.f, 4.f)),
        hlogp_(n * c),
        htarget_(n),
        x_(device, hx_),
        logp_(device, n * c),
        dlogp_(device, n * c),
        dx_(device, n * c),
        loss_(device, 1),
        dloss_(device, 1),
        target_(device, n) {
    for (int64_t i = 0; i < n; ++i) htarget_.get()[i] = (i * 7 + 3) % c;
    target_.upload(htarget_);
    kernels::ref::log_softmax_forward(hx_, hlogp_, n, c);
    logp_.upload(hlogp_);
    const float one = 1.f;
    dloss_.upload(&one);
  }
  void run() override {
    namespace kg = kernels::cuda;
    if (backward_) {
      kg::nll_loss_backward(dev_, dloss_, target_, dlogp_, n_, c_);
      kg::log_softmax_backward(dev_, dlogp_, logp_, dx_, n_, c_);
    } else {
      kg::log_softmax_forward(dev_, x_, logp_, n_, c_);
      kg::nll_loss_forward(dev_, logp_, target_, loss_, n_, c_);
    }
  }
  CheckResult check() override {
    namespace kr = kernels::ref;
    Buffer<float> a(n_ * c_), b(n_ * c_);
    if (backward_) {
      dlogp_.poison();
      dx_.poison();
      run();
      kr::nll_loss_backward(1.f, htarget_, a, n_, c_);
      kr::log_softmax_backward(a, hlogp_, b, n_, c_);
      return worst_of({compare("dlogp", dlogp_.to_host(), a, a.count(), kDeviceLossTol),
                       compare("dx", dx_.to_host(), b, b.count(), kDeviceLossTol)});
    }
    logp_.poison();
    loss_.poison();
    run();
    kr::log_softmax_forward(hx_, a, n_, c_);
    float loss = kr::nll_loss_forward(a, htarget_, n_, c_);
    return worst_of({compare("logp", logp_.to_host(), a, a.count(), kDeviceLossTol),
                     compare("loss", loss_.to_host(), &loss, 1, kDeviceLossTol)});
  }
  double bytes() const override { return 4.0 * n_ * c_ * (backward_ ? 4 : 2) + 8.0 * n_; }

 private:
  int dev_;
  bool backward_;
  int64_t n_, c_;
  Buffer<float> hx_, hlogp_;
  Buffer<int64_t> htarget_;
  DeviceBuffer<float> x_, logp_, dlogp_, dx_, loss_, dloss_;
  DeviceBuffer<int64_t> target_;
};

// As DropoutOp: the device draws the same Philox masks as the CPU for the same (seed, offset);
// elementwise dropout keeps the forward's one-byte mask for the backward, as training does.
class CudaDropoutOp : public Op {
 public:
  CudaDropoutOp(int device, bool backward, int64_t planes, int64_t plane_size, float p,
                bool per_plane)
      : dev_(device),
        backward_(backward),
        per_plane_(per_plane),
        planes_(planes),
        plane_(plane_size),
        p_(p),
        hx_(uniform(planes * plane_size, 61)),
        x_(device, hx_),
        y_(device, hx_.count()),
        mask_(device, hx_.count()) {
    kernels::cuda::dropout_forward_mask(dev_, x_, y_, mask_, hx_.count(), p_, kSeed, kOffset);
  }
  void run() override {
    namespace kg = kernels::cuda;
    const int64_t n = hx_.count();
    if (per_plane_ && backward_)
      kg::dropout2d_backward(dev_, x_, y_, planes_, plane_, p_, kSeed, kOffset);
    else if (per_plane_)
      kg::dropout2d_forward(dev_, x_, y_, planes_, plane_, p_, kSeed, kOffset);
    else if (backward_)
      kg::dropout_backward_mask(dev_, x_, mask_, y_, n, p_);
    else
      kg::dropout_forward_mask(dev_, x_, y_, mask_, n, p_, kSeed, kOffset);
  }
  CheckResult check() override {
    y_.poison();
    run();
    Buffer<float> want(hx_.count());
    if (per_plane_)
      kernels::ref::dropout2d_forward(hx_, want, planes_, plane_, p_, kSeed, kOffset);
    else
      kernels::ref::dropout_forward(hx_, want, hx_.count(), p_, kSeed, kOffset);
    return compare(backward_ ? "dx" : "y", y_.to_host(), want, want.count(), kExact);
  }
  double bytes() const override { return (per_plane_ ? 8.0 : 9.0) * hx_.count(); }

 private:
  static constexpr uint64_t kSeed = 1234, kOffset = 77;
  int dev_;
  bool backward_, per_plane_;
  int64_t planes_, plane_;
  float p_;
  Buffer<float> hx_;
  DeviceBuffer<float> x_, y_;
  DeviceBuffer<uint8_t> mask_;
};

// A ParamSet's tensors on the device.
struct DeviceParamSet {
  std::vector<DeviceBuffer<float>> t;
  DeviceParamSet(int device, const ParamSet& host) {
    for (auto& b : host.t) t.emplace_back(device, b);
  }
  std::vector<std::vector<float>> to_host() const {
    std::vector<std::vector<float>> out;
    for (auto& b : t) {
      out.emplace_back(static_cast<size_t>(b.count()));
      b.download(out.back().data());
    }
    return out;
  }
};

// Compares each downloaded tensor with want; the worst over all of them.
inline CheckResult compare_sets(const std::string& what, const std::vector<std::vector<float>>& got,
                                const std::vector<std::vector<float>>& want, double tol) {
  std::vector<CheckResult> rs;
  for (size_t i = 0; i < want.size(); ++i)
    rs.push_back(compare(what + "[" + std::to_string(i) + "]", got.at(i).data(), want[i].data(),
                         static_cast<int64_t>(want[i].size()), tol));
  return worst_of(rs);
}

// As SgdOp: one kernel per parameter tensor (lr 0.01, momentum 0.5, a step after the first).
class CudaSgdOp : public Op {
 public:
  CudaSgdOp(int device, const std::vector<int64_t>& counts)
      : dev_(device),
        hp_(counts, 100, -1.f, 1.f),
        hg_(counts, 200, -1.f, 1.f),
        hbuf_(counts, 300, -1.f, 1.f),
        p_(device, hp_),
        g_(device, hg_),
        buf_(device, hbuf_) {
    cfg_.lr = 0.01;
    cfg_.momentum = 0.5;
  }
  void run() override {
    for (size_t i = 0; i < p_.t.size(); ++i)
      kernels::cuda::sgd_step(dev_, p_.t[i], g_.t[i], buf_.t[i], p_.t[i].count(), cfg_, false);
  }
  CheckResult check() override {
    auto p = hp_.copy(), buf = hbuf_.copy();  // what the device holds before the step
    run();
    for (size_t i = 0; i < p.size(); ++i)
      kernels::ref::sgd_step(p[i].data(), hg_.t[i], buf[i].data(), hp_.t[i].count(), cfg_, false);
    return worst_of({compare_sets("param", p_.to_host(), p, kDeviceSgdTol),
                     compare_sets("momentum", buf_.to_host(), buf, kDeviceSgdTol)});
  }
  double bytes() const override { return 4.0 * 5 * hp_.total(); }

 private:
  int dev_;
  ParamSet hp_, hg_, hbuf_;
  DeviceParamSet p_, g_, buf_;
  kernels::SgdConfig cfg_;
};

// As AdamOp: torch.optim.Adam's defaults at step 10, one kernel per parameter tensor.
class CudaAdamOp : public Op {
 public:
  CudaAdamOp(int device, const std::vector<int64_t>& counts)
      : dev_(device),
        hp_(counts, 400, -1.f, 1.f),
        hg_(counts, 500, -1.f, 1.f),
        hm_(counts, 600, -0.1f, 0.1f),
        hv_(counts, 700, 0.f, 0.01f),
        p_(device, hp_),
        g_(device, hg_),
        m_(device, hm_),
        v_(device, hv_) {}
  void run() override {
    for (size_t i = 0; i < p_.t.size(); ++i)
      kernels::cuda::adam_step(dev_, p_.t[i], g_.t[i], m_.t[i], v_.t[i], p_.t[i].count(), cfg_,
                               kStep);
  }
  CheckResult check() override {
    auto p = hp_.copy(), m = hm_.copy(), v = hv_.copy();
    run();
    for (size_t i = 0; i < p.size(); ++i)
      kernels::ref::adam_step(p[i].data(), hg_.t[i], m[i].data(), v[i].data(), hp_.t[i].count(),
                              cfg_, kStep);
    return worst_of({compare_sets("param", p_.to_host(), p, kDeviceAdamTol),
                     compare_sets("m", m_.to_host(), m, kDeviceAdamTol),
                     compare_sets("v", v_.to_host(), v, kDeviceAdamTol)});
  }
  double bytes() const override { return 4.0 * 7 * hp_.total(); }

 private:
  static constexpr int64_t kStep = 10;
  int dev_;
  ParamSet hp_, hg_, hm_, hv_;
  DeviceParamSet p_, g_, m_, v_;
  kernels::AdamConfig cfg_;
};

// The reduce step dst += src over count floats on the device (kernels/cuda reduce_into).
class CudaReduceSumOp : public Op {
 public:
  CudaReduceSumOp(int device, int64_t count)
      : dev_(device),
        n_(count),
        hdst_(uniform(count, 81)),
        hsrc_(uniform(count, 82)),
        dst_(device, hdst_),
        src_(device, hsrc_) {}
  void run() override {
    kernels::cuda::reduce_into(dev_, dst_.get(), src_.get(), n_, kernels::ReduceOp::Sum);
  }
  CheckResult check() override {
    std::vector<float> want = hdst_.copy();  // what dst_ holds before the step
    run();
    for (int64_t i = 0; i < n_; ++i) want[i] += hsrc_.get()[i];
    return compare("dst", dst_.to_host(), want.data(), n_, kExact);
  }
  double bytes() const override { return 12.0 * n_; }

 private:
  int dev_;
  int64_t n_;
  Buffer<float> hdst_, hsrc_;
  DeviceBuffer<float> dst_, src_;
};

}  // namespace engine::kernels::testing
