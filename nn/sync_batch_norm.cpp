// nn/sync_batch_norm.cpp: SyncBatchNorm's forward and backward on host loops, in double sums.
#include "nn/sync_batch_norm.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "nn/chunked.h"
#include "nn/lambda_node.h"

namespace engine::nn {
namespace {

BatchNormReducer& reducer_slot() {
  static BatchNormReducer r;
  return r;
}

struct Dims {
  int64_t n, c, hw;
};

// Calls fn(offset of plane (i, c)) for every image i: channel c's values are x[off .. off + hw).
template <class Fn>
void for_planes(const Dims& d, int64_t c, Fn fn) {
  for (int64_t i = 0; i < d.n; ++i) fn((i * d.c + c) * d.hw);
}

// The statistics of the global batch: mean, invstd (C) from sums over every rank.
struct Stats {
  Tensor mean, invstd;
  double count = 0;
};

Stats global_stats(const float* x, const Dims& d, float* running_mean, float* running_var,
                   const BatchNormReducer& reduce, float momentum, float eps) {
  Tensor sums = Tensor::empty({2 * d.c + 1});  // s1 (C), s2 (C), n
  float* s = sums.data<float>();
  parallel_for(d.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double k = running_mean[c];
      double s1 = 0, s2 = 0;
      for_planes(d, c, [&](int64_t off) {
        for (int64_t j = 0; j < d.hw; ++j) {
          const double v = double(x[off + j]) - k;
          s1 += v;
          s2 += v * v;
        }
      });
      s[c] = static_cast<float>(s1);
      s[d.c + c] = static_cast<float>(s2);
    }
  });
  s[2 * d.c] = static_cast<float>(d.n * d.hw);
  reduce(sums);
  Stats st{Tensor::empty({d.c}), Tensor::empty({d.c}), double(s[2 * d.c])};
  ENGINE_CHECK(st.count > 1, "SyncBatchNorm: training needs more than one value per channel");
  for (int64_t c = 0; c < d.c; ++c) {
    const double m1 = double(s[c]) / st.count;
    const double var = std::max(0.0, double(s[d.c + c]) / st.count - m1 * m1);
    const double mean = double(running_mean[c]) + m1;
    st.mean.data<float>()[c] = static_cast<float>(mean);
    st.invstd.data<float>()[c] = static_cast<float>(1.0 / std::sqrt(var + double(eps)));
    running_mean[c] = static_cast<float>(momentum * mean + (1.0 - momentum) * running_mean[c]);
    running_var[c] = static_cast<float>(momentum * var * st.count / (st.count - 1) +
                                        (1.0 - momentum) * running_var[c]);
  }
  return st;
}

// dy (N, C, H, W) -> dx, dgamma, dbeta of the global batch norm (host tensors).
std::vector<Tensor> sync_grads(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                               const Stats& st, const Dims& d, const BatchNormReducer& reduce) {
  const float *g = dy.data<float>(), *xv = x.data<float>(), *ga = gamma.data<float>();
  const float *mean = st.mean.data<float>(), *invstd = st.invstd.data<float>();
  Tensor sums = Tensor::empty({2 * d.c});  // sum dy (C), sum dy (x - mean) (C)
  float* s = sums.data<float>();
  Tensor dgamma = Tensor::empty({d.c}), dbeta = Tensor::empty({d.c});
  for (int64_t c = 0; c < d.c; ++c) {
    double sdy = 0, sdyx = 0;
    for_planes(d, c, [&](int64_t off) {
      for (int64_t j = 0; j < d.hw; ++j) {
        sdy += g[off + j];
        sdyx += double(g[off + j]) * (double(xv[off + j]) - mean[c]);
      }
    });
    s[c] = static_cast<float>(sdy);
    s[d.c + c] = static_cast<float>(sdyx);
    dbeta.data<float>()[c] = static_cast<float>(sdy);
    dgamma.data<float>()[c] = static_cast<float>(sdyx * invstd[c]);
  }
  reduce(sums);  // over the global batch
  Tensor dx = Tensor::empty(x.shape());
  float* o = dx.data<float>();
  parallel_for(d.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double is = invstd[c], mdy = s[c] / st.count, mdyx = s[d.c + c] / st.count;
      const double scale = double(ga[c]) * is;
      for_planes(d, c, [&](int64_t off) {
        for (int64_t j = 0; j < d.hw; ++j) {
          const double xm = double(xv[off + j]) - mean[c];
          o[off + j] = static_cast<float>(scale * (g[off + j] - mdy - xm * is * is * mdyx));
        }
      });
    }
  });
  return {dx, dgamma, dbeta};
}

}  // namespace

void set_batch_norm_sync(BatchNormReducer reducer) {
  reducer_slot() = std::move(reducer);
}

const BatchNormReducer& batch_norm_sync() {
  return reducer_slot();
}

Tensor sync_batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormReducer& reduce, float momentum, float eps) {
  ENGINE_CHECK(x.defined() && x.dim() == 4, "sync_batch_norm2d: input must be (N, C, H, W)");
  ENGINE_CHECK(!ChunkedGradients::current(),
               "sync_batch_norm2d: chunked gradients "
               "(world-invariant) do not cover BatchNorm's training statistics");
  const Dims d{x.size(0), x.size(1), x.size(2) * x.size(3)};
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var})
    ENGINE_CHECK(t->defined() && t->numel() == d.c,
                 "sync_batch_norm2d: per-channel tensors must have ", d.c, " elements");
  trace::Scope ts("sync_batch_norm2d", "forward");
  const Device dev = x.device();
  const Device host = Device::cpu();
  Tensor xh = x.detach().to(host), gh = gamma.detach().to(host), bh = beta.detach().to(host);
  Tensor rm = running_mean.to(host), rv = running_var.to(host);
  Stats st =
      global_stats(xh.data<float>(), d, rm.data<float>(), rv.data<float>(), reduce, momentum, eps);
  if (dev != host) {
    Tensor(running_mean).copy_from(rm);  // a handle on the same storage
    Tensor(running_var).copy_from(rv);
  }
  Tensor yh = Tensor::empty(x.shape());
  const float *xv = xh.data<float>(), *ga = gh.data<float>(), *be = bh.data<float>();
  float* y = yh.data<float>();
  for (int64_t c = 0; c < d.c; ++c) {
    const float mean = st.mean.data<float>()[c], is = st.invstd.data<float>()[c];
    for_planes(d, c, [&](int64_t off) {
      for (int64_t j = 0; j < d.hw; ++j) y[off + j] = (xv[off + j] - mean) * is * ga[c] + be[c];
    });
  }
  Tensor out = dev == host ? yh : yh.to(dev);
  detail::record(out, "SyncBatchNormBackward", {x, gamma, beta},
                 [xh, gh, st, d, reduce, dev](const Tensor& dy) {
                   std::vector<Tensor> g = sync_grads(dy.to(Device::cpu()), xh, gh, st, d, reduce);
                   if (dev != Device::cpu())
                     for (Tensor& t : g) t = t.to(dev);
                   return g;
                 });
  return out;
}

}  // namespace engine::nn
