// tests/kernels/test_cuda_kernels.cpp: every kernels::cuda function against its kernels::cpu
// twin on the same inputs, with a tolerance per op (exact where the arithmetic is the same
// sequence of float operations), on engine::testing::cuda_test_device() (cuda:0, or
// gpu_selftest's --device). Skips with the reason ("no CUDA device: ...") when it does not
// answer; without a device a CUDA call must throw, not fall back to the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/finite.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/ops.h"
#include "kernels/dispatch.h"
#include "tests/common/test_util.h"

namespace engine::kernels {
namespace {

namespace kc = kernels::cpu;
namespace kg = kernels::cuda;

using engine::testing::filled;
using engine::testing::rel_error;

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = engine::testing::cuda_test_skip_reason(); !why.empty())
      GTEST_SKIP() << why;
    kDev = dev().index;
  }
  int kDev = 0;  // the device's index, as kernels::cuda takes it
  Device dev() const { return engine::testing::cuda_test_device(); }
  Tensor up(const std::vector<float>& v) {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, dev());
  }
  Tensor up_i64(const std::vector<int64_t>& v) {
    return Tensor::from_vector_i64(v, {static_cast<int64_t>(v.size())}, dev());
  }
  Tensor dempty(int64_t n) { return Tensor::empty({n}, DType::F32, dev()); }
  static float* p(const Tensor& t) { return t.data<float>(); }
};

// kernels::call on a CUDA device reaches kernels::cuda, which without a device (or without CUDA
// built in: the stub) throws; nothing runs on the CPU instead.
TEST(CudaKernelsBuild, CallOnACudaDeviceReachesTheCudaKernel) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "CUDA is built and answers: CudaKernels run";
  std::vector<float> x = {-1.f, 2.f}, y = {7.f, 7.f};
  EXPECT_THROW(
      kernels::call(Device::cuda(0), kc::relu_forward, kg::relu_forward, x.data(), y.data(), 2),
      Error);
  EXPECT_EQ(y, (std::vector<float>{7.f, 7.f}));
  kernels::call(Device::cpu(), kc::relu_forward, kg::relu_forward, x.data(), y.data(), 2);
  EXPECT_EQ(y, (std::vector<float>{0.f, 2.f}));
}

TEST_F(CudaKernels, LinearMatchesCpu) {
  for (LinearShape s : {LinearShape{5, 7, 3}, LinearShape{64, 784, 10}, LinearShape{1, 1, 1}}) {
    const auto x = filled(s.n * s.in, 1), w = filled(s.out * s.in, 2), b = filled(s.out, 3),
               dy = filled(s.n * s.out, 4), dw0 = filled(s.out * s.in, 5), db0 = filled(s.out, 6);
    std::vector<float> y(s.n * s.out), dx(s.n * s.in), dw(dw0), db(db0);
    kc::linear_forward(x.data(), w.data(), b.data(), y.data(), s);
    kc::linear_backward_data(dy.data(), w.data(), dx.data(), s);
    kc::linear_backward_weight(dy.data(), x.data(), dw.data(), s, 1.f);
    kc::linear_backward_bias(dy.data(), db.data(), s, 1.f);
    Tensor gx = up(x), gw = up(w), gb = up(b), gdy = up(dy), gy = dempty(s.n * s.out),
           gdx = dempty(s.n * s.in), gdw = up(dw0), gdb = up(db0);
    kg::linear_forward(kDev, p(gx), p(gw), p(gb), p(gy), s);
    kg::linear_backward_data(kDev, p(gdy), p(gw), p(gdx), s);
    kg::linear_backward_weight(kDev, p(gdy), p(gx), p(gdw), s, 1.f);
    kg::linear_backward_bias(kDev, p(gdy), p(gdb), s, 1.f);
    EXPECT_LT(rel_error(gy.to_vector(), y), 1e-5) << "forward n=" << s.n;
    EXPECT_LT(rel_error(gdx.to_vector(), dx), 1e-5) << "backward data n=" << s.n;
    EXPECT_LT(rel_error(gdw.to_vector(), dw), 1e-5) << "backward weight (beta 1) n=" << s.n;
    EXPECT_LT(rel_error(gdb.to_vector(), db), 1e-5) << "backward bias (beta 1) n=" << s.n;
    // Without bias, and beta 0 overwriting garbage.
    kc::linear_forward(x.data(), w.data(), nullptr, y.data(), s);
    kg::linear_forward(kDev, p(gx), p(gw), nullptr, p(gy), s);
    EXPECT_LT(rel_error(gy.to_vector(), y), 1e-5);
    gdw.fill_(NAN);
    kc::linear_backward_weight(dy.data(), x.data(), dw.data(), s, 0.f);
    kg::linear_backward_weight(kDev, p(gdy), p(gx), p(gdw), s, 0.f);
    EXPECT_LT(rel_error(gdw.to_vector(), dw), 1e-5);
  }
}

TEST_F(CudaKernels, Conv2dMatchesCpu) {
  const Conv2dShape shapes[] = {{2, 1, 28, 28, 10, 5, 5, 1, 0},
                                {3, 3, 9, 9, 4, 3, 3, 2, 1},
                                {2, 32, 14, 14, 64, 3, 3, 1, 1},
                                {1, 2, 5, 6, 3, 2, 3, 1, 2}};
  for (const Conv2dShape& s : shapes) {
    const auto x = filled(s.x_count(), 11), w = filled(s.w_count(), 12), b = filled(s.c_out, 13),
               dy = filled(s.y_count(), 14);
    std::vector<float> ws(kc::conv2d_workspace_count(s));
    std::vector<float> y(s.y_count()), dx(s.x_count()), dw(s.w_count()), db(s.c_out);
    kc::conv2d_forward(x.data(), w.data(), b.data(), y.data(), s, ws.data(), ws.size());
    kc::conv2d_backward_input(dy.data(), w.data(), dx.data(), s, ws.data(), ws.size());
    kc::conv2d_backward_weight(x.data(), dy.data(), dw.data(), db.data(), s, 0.f, ws.data(),
                               ws.size());
    Tensor gx = up(x), gw = up(w), gb = up(b), gdy = up(dy), gy = dempty(s.y_count()),
           gdx = dempty(s.x_count()), gdw = dempty(s.w_count()), gdb = dempty(s.c_out);
    for (int rep = 0; rep < 2; ++rep) {  // the second time from the cached plan
      kg::conv2d_forward(kDev, p(gx), p(gw), p(gb), p(gy), s);
      kg::conv2d_backward_input(kDev, p(gdy), p(gw), p(gdx), s);
      if (rep == 0) {  // the bias gradient from the filter pass, then on its own
        kg::conv2d_backward_weight(kDev, p(gx), p(gdy), p(gdw), p(gdb), s, 0.f);
      } else {
        kg::conv2d_backward_weight(kDev, p(gx), p(gdy), p(gdw), nullptr, s, 0.f);
        kg::conv2d_backward_bias(kDev, p(gdy), p(gdb), s, 0.f);
      }
      EXPECT_LT(rel_error(gy.to_vector(), y), 1e-5) << "forward c_in=" << s.c_in;
      EXPECT_LT(rel_error(gdx.to_vector(), dx), 1e-5) << "backward data c_in=" << s.c_in;
      EXPECT_LT(rel_error(gdw.to_vector(), dw), 1e-5) << "backward filter c_in=" << s.c_in;
      EXPECT_LT(rel_error(gdb.to_vector(), db), 1e-5) << "backward bias c_in=" << s.c_in;
    }
    // beta = 1 accumulates into the existing gradient.
    kg::conv2d_backward_weight(kDev, p(gx), p(gdy), p(gdw), nullptr, s, 1.f);
    std::vector<float> twice(dw);
    for (float& v : twice) v *= 2.f;
    EXPECT_LT(rel_error(gdw.to_vector(), twice), 1e-5);
  }
}

TEST_F(CudaKernels, ReluIsExact) {
  auto x = filled(1001, 21);
  x[3] = NAN;
  const auto dy = filled(1001, 22);
  std::vector<float> y(x.size()), dx(x.size());
  kc::relu_forward(x.data(), y.data(), x.size());
  kc::relu_backward(dy.data(), y.data(), dx.data(), x.size());
  Tensor gx = up(x), gy = dempty(x.size()), gdy = up(dy), gdx = dempty(x.size());
  kg::relu_forward(kDev, p(gx), p(gy), x.size());
  kg::relu_backward(kDev, p(gdy), p(gy), p(gdx), x.size());
  EXPECT_EQ(rel_error(gy.to_vector(), y), 0.0);
  EXPECT_EQ(rel_error(gdx.to_vector(), dx), 0.0);
}

TEST_F(CudaKernels, DropoutMasksEqualCpuMasks) {
  for (int64_t n : {0, 1, 3, 5, 1001, 1 << 16}) {
    for (float prob : {0.f, 0.3f, 0.5f, 1.f}) {
      const auto x = filled(n, 31);
      std::vector<float> y(n), y2(n);
      kc::dropout_forward(x.data(), y.data(), n, prob, 42, 7);
      Tensor gx = up(x), gy = dempty(n);
      kg::dropout_forward(kDev, p(gx), p(gy), n, prob, 42, 7);
      EXPECT_EQ(gy.to_vector(), y) << "n " << n << " p " << prob;
      kc::dropout_backward(x.data(), y.data(), n, prob, 42, 9);
      kg::dropout_backward(kDev, p(gx), p(gy), n, prob, 42, 9);
      EXPECT_EQ(gy.to_vector(), y) << "backward n " << n << " p " << prob;
    }
  }
  const int64_t planes = 6 * 5, plane = 7 * 3;
  const auto x = filled(planes * plane, 32);
  std::vector<float> y(x.size());
  Tensor gx = up(x), gy = dempty(x.size());
  kc::dropout2d_forward(x.data(), y.data(), planes, plane, 0.4f, 3, 11);
  kg::dropout2d_forward(kDev, p(gx), p(gy), planes, plane, 0.4f, 3, 11);
  EXPECT_EQ(gy.to_vector(), y);
  kc::dropout2d_backward(x.data(), y.data(), planes, plane, 0.4f, 3, 12);
  kg::dropout2d_backward(kDev, p(gx), p(gy), planes, plane, 0.4f, 3, 12);
  EXPECT_EQ(gy.to_vector(), y);
}

// Dropout by global position: the _at kernels draw as the CPU's for any first element (heads
// before a group of 4 included) and any first plane.
TEST_F(CudaKernels, DropoutAtAGlobalPositionMatchesCpu) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}})
    for (uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{50 * 77}}) {
      const auto x = filled(n, 35);
      std::vector<float> y(n);
      std::vector<uint8_t> mask(n);
      kc::dropout_forward_mask_at(x.data(), y.data(), mask.data(), n, 0.5f, 42, 13, first);
      Tensor gx = up(x), gy = dempty(n);
      Tensor gmask = Tensor::empty({n}, DType::U8, dev());
      kg::dropout_forward_mask_at(kDev, p(gx), p(gy), gmask.data<uint8_t>(), n, 0.5f, 42, 13,
                                  first);
      EXPECT_EQ(gy.to_vector(), y) << "n " << n << " first " << first;
      Tensor hmask = gmask.to(Device::cpu());
      EXPECT_EQ(std::vector<uint8_t>(hmask.data<uint8_t>(), hmask.data<uint8_t>() + n), mask)
          << "n " << n << " first " << first;
      kc::dropout_backward_at(x.data(), y.data(), n, 0.5f, 42, 13, first);
      kg::dropout_backward_at(kDev, p(gx), p(gy), n, 0.5f, 42, 13, first);
      EXPECT_EQ(gy.to_vector(), y) << "backward n " << n << " first " << first;
      kc::dropout2d_forward_at(x.data(), y.data(), n, 1, 0.5f, 42, 13, first);
      kg::dropout2d_forward_at(kDev, p(gx), p(gy), n, 1, 0.5f, 42, 13, first);
      EXPECT_EQ(gy.to_vector(), y) << "2d n " << n << " first " << first;
    }
}

// The kept-mask path: the same bytes and outputs as the CPU's, and its backward.
TEST_F(CudaKernels, DropoutKeptMaskMatchesCpu) {
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{65}, int64_t{100003}})
    for (float prob : {0.f, 0.3f, 1.f}) {
      const auto x = filled(n, 33), dy = filled(n, 34);
      std::vector<float> y(n), dx(n);
      std::vector<uint8_t> mask(n);
      kc::dropout_forward_mask(x.data(), y.data(), mask.data(), n, prob, 42, 0xFFFFFFF0);
      kc::dropout_backward_mask(dy.data(), mask.data(), dx.data(), n, prob);
      Tensor gx = up(x), gy = dempty(n), gdy = up(dy), gdx = dempty(n);
      Tensor gmask = Tensor::empty({n}, DType::U8, dev());
      kg::dropout_forward_mask(kDev, p(gx), p(gy), gmask.data<uint8_t>(), n, prob, 42, 0xFFFFFFF0);
      kg::dropout_backward_mask(kDev, p(gdy), gmask.data<uint8_t>(), p(gdx), n, prob);
      EXPECT_EQ(gy.to_vector(), y) << "n " << n << " p " << prob;
      Tensor hmask = gmask.to(Device::cpu());
      EXPECT_EQ(std::vector<uint8_t>(hmask.data<uint8_t>(), hmask.data<uint8_t>() + n), mask)
          << "n " << n << " p " << prob;
      EXPECT_EQ(gdx.to_vector(), dx) << "n " << n << " p " << prob;
    }
}

TEST_F(CudaKernels, MaxPoolMatchesCpuIncludingIndices) {
  for (Pool2dShape s : {Pool2dShape{2, 3, 8, 8, 2, 2}, Pool2dShape{2, 2, 9, 7, 3, 2},
                        Pool2dShape{1, 1, 5, 5, 3, 1}}) {
    auto x = filled(s.n * s.c * s.h * s.w, 41);
    x[5] = x[4];  // a tie: the first maximum wins
    x[17] = NAN;
    const int64_t out = s.planes() * s.oh() * s.ow();
    const auto dy = filled(out, 42);
    std::vector<float> y(out), dx(x.size());
    std::vector<int32_t> arg(out);
    kc::max_pool2d_forward(x.data(), y.data(), arg.data(), s);
    kc::max_pool2d_backward(dy.data(), arg.data(), dx.data(), s);
    Tensor gx = up(x), gy = dempty(out), gdy = up(dy), gdx = dempty(x.size());
    Tensor garg = Tensor::empty({out}, DType::I32, dev());
    int32_t* ga = garg.data<int32_t>();
    kg::max_pool2d_forward(kDev, p(gx), p(gy), ga, s);
    kg::max_pool2d_backward(kDev, p(gdy), ga, p(gdx), s);
    EXPECT_EQ(rel_error(gy.to_vector(), y), 0.0) << "k " << s.k << " stride " << s.stride;
    Tensor harg = garg.to(Device::cpu());
    EXPECT_EQ(std::vector<int32_t>(harg.data<int32_t>(), harg.data<int32_t>() + out), arg);
    EXPECT_LT(rel_error(gdx.to_vector(), dx), 1e-6) << "k " << s.k << " stride " << s.stride;
  }
}

// The fused relu(max_pool2d) and its backward: the CPU's values, indices and gradient.
TEST_F(CudaKernels, MaxPoolReluMatchesCpuIncludingIndices) {
  for (Pool2dShape s : {Pool2dShape{2, 3, 8, 8, 2, 2}, Pool2dShape{3, 2, 7, 9, 2, 2},
                        Pool2dShape{2, 2, 9, 7, 3, 2}}) {
    auto x = filled(s.n * s.c * s.h * s.w, 43);
    x[17] = NAN;
    const int64_t out = s.planes() * s.oh() * s.ow();
    const auto dy = filled(out, 44);
    std::vector<float> y(out), dx(x.size());
    std::vector<int32_t> arg(out);
    kc::max_pool2d_relu_forward(x.data(), y.data(), arg.data(), s);
    kc::max_pool2d_relu_backward(dy.data(), y.data(), arg.data(), dx.data(), s);
    Tensor gx = up(x), gy = dempty(out), gdy = up(dy), gdx = dempty(x.size());
    Tensor garg = Tensor::empty({out}, DType::I32, dev());
    int32_t* ga = garg.data<int32_t>();
    kg::max_pool2d_relu_forward(kDev, p(gx), p(gy), ga, s);
    kg::max_pool2d_relu_backward(kDev, p(gdy), p(gy), ga, p(gdx), s);
    EXPECT_EQ(rel_error(gy.to_vector(), y), 0.0) << "k " << s.k << " stride " << s.stride;
    Tensor harg = garg.to(Device::cpu());
    EXPECT_EQ(std::vector<int32_t>(harg.data<int32_t>(), harg.data<int32_t>() + out), arg);
    EXPECT_LT(rel_error(gdx.to_vector(), dx), 1e-6) << "k " << s.k << " stride " << s.stride;
  }
}

TEST_F(CudaKernels, BatchNormMatchesCpu) {
  for (BatchNormShape s :
       {BatchNormShape{4, 3, 25}, BatchNormShape{64, 16, 196}, BatchNormShape{2, 5, 1}}) {
    const int64_t n = s.n * s.c * s.hw;
    const auto x = filled(n, 51, -2.f, 3.f), g = filled(s.c, 52), b = filled(s.c, 53),
               dy = filled(n, 54);
    std::vector<float> rm(s.c, 0.1f), rv(s.c, 0.9f), y(n), mean(s.c), invstd(s.c), dx(n), dg(s.c),
        db(s.c), ye(n);
    Tensor gx = up(x), gg = up(g), gb = up(b), grm = up(rm), grv = up(rv), gy = dempty(n),
           gmean = dempty(s.c), ginv = dempty(s.c), gdy = up(dy), gdx = dempty(n),
           gdg = dempty(s.c), gdb = dempty(s.c), gye = dempty(n);
    kc::batch_norm_train_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), invstd.data(),
                                 rm.data(), rv.data(), s, 0.1f, 1e-5f);
    kc::batch_norm_backward(dy.data(), x.data(), g.data(), mean.data(), invstd.data(), dx.data(),
                            dg.data(), db.data(), s);
    kc::batch_norm_eval_forward(x.data(), g.data(), b.data(), rm.data(), rv.data(), ye.data(), s,
                                1e-5f);
    kg::batch_norm_train_forward(kDev, p(gx), p(gg), p(gb), p(gy), p(gmean), p(ginv), p(grm),
                                 p(grv), s, 0.1f, 1e-5f);
    kg::batch_norm_backward(kDev, p(gdy), p(gx), p(gg), p(gmean), p(ginv), p(gdx), p(gdg), p(gdb),
                            s);
    kg::batch_norm_eval_forward(kDev, p(gx), p(gg), p(gb), p(grm), p(grv), p(gye), s, 1e-5f);
    EXPECT_LT(rel_error(gy.to_vector(), y), 1e-5);
    EXPECT_LT(rel_error(gmean.to_vector(), mean), 1e-6);
    EXPECT_LT(rel_error(ginv.to_vector(), invstd), 1e-6);
    EXPECT_LT(rel_error(grm.to_vector(), rm), 1e-6);
    EXPECT_LT(rel_error(grv.to_vector(), rv), 1e-6);
    // dx cancels to almost nothing where a channel has few values (two, in the last shape):
    // relative to the size of its terms, gamma * invstd * dy.
    double gain = 0, dy_max = 0;
    for (int64_t c = 0; c < s.c; ++c) gain = std::max(gain, std::fabs(double{g[c]} * invstd[c]));
    for (float v : dy) dy_max = std::max(dy_max, static_cast<double>(std::fabs(v)));
    const double terms = gain * dy_max;
    EXPECT_LT(rel_error(gdx.to_vector(), dx, terms), 1e-5) << s.n << "x" << s.c << "x" << s.hw;
    EXPECT_LT(rel_error(gdg.to_vector(), dg), 1e-5);
    EXPECT_LT(rel_error(gdb.to_vector(), db), 1e-5);
    EXPECT_LT(rel_error(gye.to_vector(), ye), 1e-6);
  }
}

TEST_F(CudaKernels, SoftmaxLossArgmaxMatchCpu) {
  const int64_t n = 37, c = 10;
  auto x = filled(n * c, 61, -5.f, 5.f);
  x[3 * c + 4] = NAN;  // row 3's argmax is the NaN
  const auto dy = filled(n * c, 62);
  std::vector<int64_t> target(n);
  for (int64_t i = 0; i < n; ++i) target[i] = (i * 7) % c;
  std::vector<float> y(n * c), dx(n * c), dlogp(n * c);
  std::vector<int64_t> am(n);
  kc::log_softmax_forward(x.data(), y.data(), n, c);
  kc::log_softmax_backward(dy.data(), y.data(), dx.data(), n, c);
  std::vector<float> clean(y);
  for (float& v : clean) v = std::isnan(v) ? 0.f : v;
  float loss = 0.f;
  const float half = 0.5f;
  kc::nll_loss_forward(clean.data(), target.data(), &loss, n, c);
  kc::nll_loss_backward(&half, target.data(), dlogp.data(), n, c);
  kc::argmax_rows(x.data(), n, c, am.data());

  Tensor gx = up(x), gy = dempty(n * c), gdy = up(dy), gdx = dempty(n * c), gt = up_i64(target),
         gclean = up(clean), gloss = dempty(1), gdloss = up({0.5f}), gdlogp = dempty(n * c),
         gam = Tensor::empty({n}, DType::I64, dev());
  kg::log_softmax_forward(kDev, p(gx), p(gy), n, c);
  kg::log_softmax_backward(kDev, p(gdy), p(gy), p(gdx), n, c);
  kg::nll_loss_forward(kDev, p(gclean), gt.data<int64_t>(), p(gloss), n, c);
  kg::nll_loss_backward(kDev, p(gdloss), gt.data<int64_t>(), p(gdlogp), n, c);
  kg::argmax_rows(kDev, p(gx), n, c, gam.data<int64_t>());
  EXPECT_LT(rel_error(gy.to_vector(), y), 1e-6);
  EXPECT_LT(rel_error(gdx.to_vector(), dx), 1e-6);
  EXPECT_NEAR(gloss.item(), loss, 1e-6 * std::fabs(loss));
  EXPECT_EQ(gdlogp.to_vector(), dlogp);
  EXPECT_EQ(gam.to_vector_i64(), am);

  // A bad target is not read through: the loss is NaN (no host read inside the step; the
  // training data's labels are checked when the data is opened).
  std::vector<int64_t> bad(target);
  bad[5] = c;
  Tensor gbad = up_i64(bad);
  kg::nll_loss_forward(kDev, p(gclean), gbad.data<int64_t>(), p(gloss), n, c);
  EXPECT_TRUE(std::isnan(gloss.item()));
}

TEST_F(CudaKernels, OptimizersMatchCpu) {
  const int64_t n = 777;
  SgdConfig sc;
  sc.lr = 0.05;
  sc.momentum = 0.9;
  sc.weight_decay = 1e-3;
  sc.nesterov = true;
  AdamConfig ac;
  ac.weight_decay = 1e-2;
  auto param = filled(n, 71), buf = std::vector<float>(n), m = std::vector<float>(n, 0.f),
       v = std::vector<float>(n, 0.f), pa = filled(n, 72);
  Tensor gp = up(param), gbuf = dempty(n), gpa = up(pa), gm = up(m), gv = up(v);
  for (int step = 1; step <= 3; ++step) {
    const auto g = filled(n, 100 + step);
    Tensor gg = up(g);
    kc::sgd_step(param.data(), g.data(), buf.data(), n, sc, step == 1);
    kg::sgd_step(kDev, p(gp), p(gg), p(gbuf), n, sc, step == 1);
    kc::adam_step(pa.data(), g.data(), m.data(), v.data(), n, ac, step);
    kg::adam_step(kDev, p(gpa), p(gg), p(gm), p(gv), n, ac, step);
  }
  EXPECT_LT(rel_error(gp.to_vector(), param), 1e-6);
  EXPECT_LT(rel_error(gbuf.to_vector(), buf), 1e-6);
  EXPECT_LT(rel_error(gpa.to_vector(), pa), 1e-6);
  EXPECT_LT(rel_error(gm.to_vector(), m), 1e-6);
  EXPECT_LT(rel_error(gv.to_vector(), v), 1e-6);
}

TEST_F(CudaKernels, ReduceIntoAndScaleMatchCpu) {
  const int64_t n = 1003;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min}) {
    auto a = filled(n, 81), b = filled(n, 82);
    b[7] = NAN;
    Tensor ga = up(a), gb = up(b);
    kc::reduce_into(a.data(), b.data(), n, op);
    kg::reduce_into(kDev, p(ga), p(gb), n, op);
    EXPECT_EQ(rel_error(ga.to_vector(), a), 0.0) << reduce_op_name(op);
  }
  std::vector<int64_t> ia(n), ib(n);
  for (int64_t i = 0; i < n; ++i) ia[i] = i * 3 - 100, ib[i] = 5 - i;
  Tensor gia = up_i64(ia), gib = up_i64(ib);
  kc::reduce_into(ia.data(), ib.data(), n, ReduceOp::Max);
  kg::reduce_into(kDev, gia.data<int64_t>(), gib.data<int64_t>(), n, ReduceOp::Max);
  EXPECT_EQ(gia.to_vector_i64(), ia);
  auto a = filled(n, 83);
  Tensor ga = up(a);
  kc::scale(a.data(), n, 0.25f);
  kg::scale(kDev, p(ga), n, 0.25f);
  EXPECT_EQ(ga.to_vector(), a);
}

TEST_F(CudaKernels, BiasGradientsAreDeterministic) {
  const Conv2dShape s{32, 8, 12, 12, 16, 3, 3, 1, 1};
  const auto dy = filled(s.y_count(), 91);
  Tensor gdy = up(dy), a = dempty(s.c_out), b = dempty(s.c_out);
  kg::conv2d_backward_bias(kDev, p(gdy), p(a), s, 0.f);
  kg::conv2d_backward_bias(kDev, p(gdy), p(b), s, 0.f);
  EXPECT_EQ(a.to_vector(), b.to_vector());
}

// Issue 14, finding 4: with an empty batch and beta 0 the weight gradients are zeros, as on the
// CPU, even where the block held NaN (a fresh block from the caching allocator may); beta 0.5
// halves them.
TEST_F(CudaKernels, EmptyBatchWeightGradientsAreZerosNotNaN) {
  const float nan = std::nanf("");
  const Conv2dShape cs{0, 2, 5, 5, 3, 3, 3, 1, 1};
  const LinearShape ls{0, 4, 3};
  Tensor x = dempty(1), dy = dempty(1);
  Tensor cdw = up(std::vector<float>(cs.w_count(), nan)), cdb = up({nan, nan, nan});
  kg::conv2d_backward_weight(kDev, p(x), p(dy), p(cdw), p(cdb), cs, 0.f);
  EXPECT_EQ(cdw.to_vector(), std::vector<float>(cs.w_count(), 0.f));
  EXPECT_EQ(cdb.to_vector(), std::vector<float>(3, 0.f));
  Tensor ldw = up(std::vector<float>(ls.out * ls.in, nan)), ldb = up({nan, nan, nan});
  kg::linear_backward_weight(kDev, p(dy), p(x), p(ldw), ls, 0.f);
  kg::linear_backward_bias(kDev, p(dy), p(ldb), ls, 0.f);
  EXPECT_EQ(ldw.to_vector(), std::vector<float>(ls.out * ls.in, 0.f));
  EXPECT_EQ(ldb.to_vector(), std::vector<float>(3, 0.f));
  Tensor half = up(std::vector<float>(cs.w_count(), 2.f));
  kg::conv2d_backward_weight(kDev, p(x), p(dy), p(half), nullptr, cs, 0.5f);
  EXPECT_EQ(half.to_vector(), std::vector<float>(cs.w_count(), 1.f));
}

// The non-finite scan flags what the CPU's flags, in one block's range or across many blocks, and
// the backward's seed is 1 or NaN as on the CPU.
TEST_F(CudaKernels, NonfiniteScanAndSeedMatchCpu) {
  const float nan = std::nanf(""), inf = INFINITY;
  for (const int64_t n : {int64_t{1}, int64_t{300}, int64_t{1} << 20})
    for (const float bad : {0.f, inf, -inf, nan})
      for (const int64_t at : {int64_t{0}, n - 1}) {
        std::vector<float> x(n, 0.25f);
        x[at] = bad;
        float want = 0.f;
        kc::flag_nonfinite(x.data(), n, &want);
        Tensor gx = up(x), flag = Tensor::zeros({1}, DType::F32, dev());
        kg::flag_nonfinite(kDev, p(gx), n, p(flag));
        EXPECT_EQ(flag.to_vector()[0], want) << "n " << n << " at " << at << " value " << bad;
      }
  for (const float loss : {2.5f, inf, nan}) {
    float want = 0.f;
    kc::finite_seed(&loss, &want);
    Tensor gl = up({loss}), seed = dempty(1);
    kg::finite_seed(kDev, p(gl), p(seed));
    const float got = seed.to_vector()[0];
    EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << loss;
  }
}

}  // namespace
}  // namespace engine::kernels
