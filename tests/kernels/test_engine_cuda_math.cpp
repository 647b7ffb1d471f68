// tests/kernels/test_engine_cuda_math.cpp: the arithmetic of --cuda-kernels engine's CUDA kernels,
// run on the CPU against the reference (no GPU needed): the weight gradient's plan and index
// maps (kernels/cuda/wgrad_plan.h), summed in the kernel's order (slices of positions, then the
// reduce's 8 strided rows), the bf16 convolution's im2col and col2im (the same header), and the
// max-pool gather (kernels/cuda/pool_gather.h). The kernels
// themselves are checked on a GPU by the kernel-case table's /engine cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/pool.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/pool_gather.h"
#include "kernels/cuda/wgrad_plan.h"
#include "kernels/testing/check.h"

namespace engine::kernels::cuda {
namespace {

using testing::Buffer;
using testing::uniform;

// dw (m, k) and db (m) as wgrad.cu sums them: each slice in q order, slice s into row s % 8,
// then rows 0..7 in order.
void emulate_wgrad(const float* x, const float* dy, const WgradGeom& g, float* dw, float* db) {
  for (int32_t m = 0; m < g.m; ++m)
    for (int32_t j = 0; j <= g.k; ++j) {
      float rows[8] = {};
      for (int32_t s = 0; s < g.slices; ++s) {
        float acc = 0.f;
        const int32_t q1 = std::min(g.q, (s + 1) * g.slice_len);
        for (int32_t q = s * g.slice_len; q < q1; ++q) {
          const float a = wgrad_dy_at(dy, g, m, q);
          acc = j < g.k ? std::fma(a, wgrad_x_at(x, g, j, q), acc) : acc + a;
        }
        rows[s % 8] += acc;
      }
      float total = rows[0];
      for (int r = 1; r < 8; ++r) total += rows[r];
      (j < g.k ? dw[m * g.k + j] : db[m]) = wgrad_finish(0.f, total, 0.f);
    }
}

TEST(EngineWgradPlan, SlicesCoverThePositionsOnceAndDependOnTheShapeOnly) {
  for (int64_t q : {1, 15, 16, 255, 256, 257, 25088, 100352, 200704, 1 << 22}) {
    const int64_t len = wgrad_slice_len(q), slices = (q + len - 1) / len;
    EXPECT_EQ(len % kWgradChunk, 0) << q;
    EXPECT_GE(len, kWgradMinSlice) << q;
    EXPECT_LE(slices, kWgradMaxSlices) << q;
    EXPECT_GE(slices * len, q) << q;
    EXPECT_LT((slices - 1) * len, q) << q;
  }
  const WgradGeom g = wgrad_geom(Conv2dShape{128, 1, 28, 28, 32, 3, 3, 1, 1});
  EXPECT_EQ(g.m, 32);
  EXPECT_EQ(g.k, 9);
  EXPECT_EQ(g.q, 128 * 784);
  EXPECT_EQ(g.slice_len, 256);
  EXPECT_EQ(g.slices, 392);
}

TEST(EngineWgradPlan, ConvolutionInTheKernelsOrderMatchesTheReference) {
  const Conv2dShape shapes[] = {
      {3, 1, 28, 28, 32, 3, 3, 1, 1},  {2, 32, 14, 14, 64, 3, 3, 1, 1},
      {2, 16, 14, 14, 32, 5, 5, 1, 2}, {2, 10, 12, 12, 20, 5, 5, 1, 0},
      {2, 3, 11, 9, 5, 3, 3, 2, 1},    {2, 3, 10, 9, 4, 2, 2, 1, 1},  // strided; even kernel
      {2, 3, 9, 11, 4, 3, 5, 1, 2},    {2, 2, 10, 7, 3, 4, 2, 3, 0},  // rectangular; stride 3
      {2, 2, 3, 3, 3, 3, 3, 1, 2},                                    // output larger than input
  };
  for (const Conv2dShape& s : shapes) {
    const WgradGeom g = wgrad_geom(s);
    Buffer<float> x = uniform(s.x_count(), 1), dy = uniform(s.y_count(), 2);
    Buffer<float> dw(s.w_count()), db(s.c_out), want_dw(s.w_count()), want_db(s.c_out);
    emulate_wgrad(x, dy, g, dw, db);
    ref::conv2d_backward_weight(x, dy, want_dw, s);
    ref::conv2d_backward_bias(dy, want_db, s);
    const int64_t k = s.n * s.oh() * s.ow();
    const testing::CheckResult rw =
        testing::compare("dw", dw, want_dw, want_dw.count(), 2 * testing::sum_tol(k));
    const testing::CheckResult rb =
        testing::compare("db", db, want_db, want_db.count(), 2 * testing::sum_tol(k));
    EXPECT_TRUE(rw.ok()) << "c_in " << s.c_in << " h " << s.h << ": " << rw.message();
    EXPECT_TRUE(rb.ok()) << "c_in " << s.c_in << " h " << s.h << ": " << rb.message();
  }
}

TEST(EngineWgradPlan, LinearIsAOneByOneConvolution) {
  const LinearShape s{7, 33, 5};
  const WgradGeom g = wgrad_geom(s);
  EXPECT_EQ(g.m, 5);
  EXPECT_EQ(g.k, 33);
  EXPECT_EQ(g.q, 7);
  Buffer<float> x = uniform(s.n * s.in, 3), w = uniform(s.out * s.in, 4);
  Buffer<float> dy = uniform(s.n * s.out, 5);
  for (int32_t q = 0; q < g.q; ++q) {
    for (int32_t j = 0; j < g.k; ++j) EXPECT_EQ(wgrad_x_at(x, g, j, q), x[q * s.in + j]);
    for (int32_t m = 0; m < g.m; ++m) EXPECT_EQ(wgrad_dy_at(dy, g, m, q), dy[q * s.out + m]);
  }
  Buffer<float> dw(s.out * s.in), db(s.out), dx(s.n * s.in), want_dw(s.out * s.in), want_db(s.out);
  emulate_wgrad(x, dy, g, dw, db);
  ref::linear_backward(x, w, dy, dx, want_dw, want_db, s);
  const testing::CheckResult r =
      testing::compare("dw", dw, want_dw, want_dw.count(), 2 * testing::sum_tol(s.n));
  EXPECT_TRUE(r.ok()) << r.message();
}

// conv_bf16.cu's maps: y = w col + b over wgrad_x_at's columns (im2col), and dx = col2im_at of
// dcol = w^T dy, against the reference forward and input gradient.
TEST(EngineConvColumns, Im2colAndCol2imMatchTheReference) {
  const Conv2dShape shapes[] = {{2, 32, 14, 14, 64, 3, 3, 1, 1}, {2, 10, 12, 12, 20, 5, 5, 1, 0},
                                {2, 3, 11, 9, 5, 3, 3, 2, 1},    {2, 3, 9, 11, 4, 3, 5, 1, 2},
                                {2, 2, 10, 7, 3, 4, 2, 3, 0},    {2, 2, 3, 3, 3, 3, 3, 1, 2}};
  for (const Conv2dShape& s : shapes) {
    const WgradGeom g = wgrad_geom(s);
    Buffer<float> x = uniform(s.x_count(), 8), w = uniform(s.w_count(), 9),
                  b = uniform(s.c_out, 10);
    Buffer<float> dy = uniform(s.y_count(), 11), y(s.y_count()), want_y(s.y_count());
    Buffer<float> dcol(int64_t{g.q} * g.k), dx(s.x_count()), want_dx(s.x_count());
    for (int32_t q = 0; q < g.q; ++q)
      for (int32_t m = 0; m < g.m; ++m) {
        float acc = b[m];
        for (int32_t j = 0; j < g.k; ++j) acc += w[m * g.k + j] * wgrad_x_at(x, g, j, q);
        y[(q / g.p * g.m + m) * g.p + q % g.p] = acc;
      }
    for (int32_t q = 0; q < g.q; ++q)
      for (int32_t j = 0; j < g.k; ++j) {
        float acc = 0.f;
        for (int32_t m = 0; m < g.m; ++m) acc += w[m * g.k + j] * wgrad_dy_at(dy, g, m, q);
        dcol[(q / g.p * g.k + j) * g.p + q % g.p] = acc;
      }
    for (int32_t e = 0; e < s.x_count(); ++e) dx[e] = col2im_at(dcol, g, e);
    ref::conv2d_forward(x, w, b, want_y, s);
    ref::conv2d_backward_input(dy, w, want_dx, s);
    const testing::CheckResult ry =
        testing::compare("y", y, want_y, want_y.count(), 2 * testing::sum_tol(s.k()));
    const testing::CheckResult rx = testing::compare("dx", dx, want_dx, want_dx.count(),
                                                     2 * testing::sum_tol(s.c_out * s.kh * s.kw));
    EXPECT_TRUE(ry.ok()) << "c_in " << s.c_in << " h " << s.h << ": " << ry.message();
    EXPECT_TRUE(rx.ok()) << "c_in " << s.c_in << " h " << s.h << ": " << rx.message();
  }
}

TEST(EngineWgradPlan, FinishWritesTheSumWhereBetaIsZero) {
  EXPECT_EQ(wgrad_finish(NAN, 2.f, 0.f), 2.f);  // a fresh block's NaN is not kept
  EXPECT_EQ(wgrad_finish(3.f, 2.f, 1.f), 5.f);
  EXPECT_EQ(wgrad_finish(3.f, 2.f, 0.5f), 3.5f);
}

// Every input element's gather against the reference backward, with and without relu; windows
// that tile, overlap (k > stride), skip (k < stride) and leave rows uncovered.
TEST(EnginePoolGather, MatchesTheReferenceBackward) {
  const Pool2dShape shapes[] = {{2, 3, 28, 28, 2, 2}, {2, 2, 7, 9, 2, 2},  {2, 2, 9, 7, 3, 2},
                                {1, 4, 5, 5, 3, 1},   {2, 1, 6, 11, 3, 3}, {1, 1, 1, 1, 1, 1},
                                {1, 2, 10, 10, 2, 3}};
  for (const Pool2dShape& s : shapes) {
    const int64_t in = s.planes() * s.h * s.w, out = s.planes() * s.oh() * s.ow();
    Buffer<float> x = uniform(in, 6), dy = uniform(out, 7), y(out), dx(in), want(in);
    Buffer<int32_t> arg(out);
    const PoolGeom g{static_cast<int32_t>(s.h),    static_cast<int32_t>(s.w),
                     static_cast<int32_t>(s.k),    static_cast<int32_t>(s.stride),
                     static_cast<int32_t>(s.oh()), static_cast<int32_t>(s.ow())};
    ref::max_pool2d_forward(x, y, arg, s);
    for (int64_t i = 0; i < in; ++i)
      dx[i] = pool_gather<false>(dy, y, arg, g, static_cast<int32_t>(i));
    ref::max_pool2d_backward(dy, arg, want, s);
    EXPECT_TRUE(testing::compare("dx", dx, want, in, testing::kExact).ok()) << s.h << "x" << s.w;
    cpu::max_pool2d_relu_forward(x, y, arg, s);
    for (int64_t i = 0; i < in; ++i)
      dx[i] = pool_gather<true>(dy, y, arg, g, static_cast<int32_t>(i));
    cpu::max_pool2d_relu_backward(dy, y, arg, want, s);
    EXPECT_TRUE(testing::compare("dx relu", dx, want, in, testing::kExact).ok())
        << s.h << "x" << s.w;
  }
}

}  // namespace
}  // namespace engine::kernels::cuda
