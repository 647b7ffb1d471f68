// nn/sync_batch_norm.cpp: SyncBatchNorm's forward and backward on host loops, in double sums.
#include "nn/sync_batch_norm.h"

#include <algorithm>
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

// mean, invstd and the running buffers' update from the global batch's sums s (C values of
// s1 = sum (x - K), then C of s2 = sum (x - K)^2) over count values per channel.
Stats finish_stats(const std::vector<double>& s, double count, const Dims& d, float* running_mean,
                   float* running_var, float momentum, float eps) {
  Stats st{Tensor::empty({d.c}), Tensor::empty({d.c}), count};
  ENGINE_CHECK(st.count > 1, "SyncBatchNorm: training needs more than one value per channel");
  for (int64_t c = 0; c < d.c; ++c) {
    const double m1 = s[c] / st.count;
    const double var = std::max(0.0, s[d.c + c] / st.count - m1 * m1);
    const double mean = double(running_mean[c]) + m1;
    st.mean.data<float>()[c] = static_cast<float>(mean);
    st.invstd.data<float>()[c] = static_cast<float>(1.0 / std::sqrt(var + double(eps)));
    running_mean[c] = static_cast<float>(momentum * mean + (1.0 - momentum) * running_mean[c]);
    running_var[c] = static_cast<float>(momentum * var * st.count / (st.count - 1) +
                                        (1.0 - momentum) * running_var[c]);
  }
  return st;
}

// Channel c's shifted sums over images [i0, i1): s1 += x - k, s2 += (x - k)^2.
void shifted_sums(const float* x, const Dims& d, int64_t c, int64_t i0, int64_t i1, double k,
                  double* s1, double* s2) {
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t off = (i * d.c + c) * d.hw;
    for (int64_t j = 0; j < d.hw; ++j) {
      const double v = double(x[off + j]) - k;
      *s1 += v;
      *s2 += v * v;
    }
  }
}

Stats global_stats(const float* x, const Dims& d, float* running_mean, float* running_var,
                   const BatchNormReducer& reduce, float momentum, float eps) {
  Tensor sums = Tensor::empty({2 * d.c + 1});  // s1 (C), s2 (C), n
  float* s = sums.data<float>();
  parallel_for(d.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s1 = 0, s2 = 0;
      shifted_sums(x, d, c, 0, d.n, running_mean[c], &s1, &s2);
      s[c] = static_cast<float>(s1);
      s[d.c + c] = static_cast<float>(s2);
    }
  });
  s[2 * d.c] = static_cast<float>(d.n * d.hw);
  reduce(sums);
  return finish_stats(std::vector<double>(s, s + 2 * d.c), double(s[2 * d.c]), d, running_mean,
                      running_var, momentum, eps);
}

// The world-invariant mode's per-chunk sums, in kLanes independent double lanes: element j of a
// plane goes into lane j % kLanes, each lane adds in order, and the lanes are added in one fixed
// order at the end. The bits depend on the chunk's values alone (never on the batch around it),
// and the lanes vectorise where one running sum waits on each add.
constexpr int64_t kLanes = 8;

double fold_lanes(const double* a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// shifted_sums over images [i0, i1) of channel c, in lanes.
void lane_shifted_sums(const float* x, const Dims& d, int64_t c, int64_t i0, int64_t i1, double k,
                       double* s1, double* s2) {
  double a1[kLanes] = {}, a2[kLanes] = {};
  for (int64_t i = i0; i < i1; ++i) {
    const float* p = x + (i * d.c + c) * d.hw;
    int64_t j = 0;
    for (; j + kLanes <= d.hw; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        const double v = double(p[j + l]) - k;
        a1[l] += v;
        a2[l] += v * v;
      }
    for (int64_t l = 0; j < d.hw; ++j, ++l) {
      const double v = double(p[j]) - k;
      a1[l] += v;
      a2[l] += v * v;
    }
  }
  *s1 += fold_lanes(a1);
  *s2 += fold_lanes(a2);
}

// grad_sums over images [i0, i1) of channel c, in lanes.
void lane_grad_sums(const float* g, const float* xv, const Dims& d, int64_t c, int64_t i0,
                    int64_t i1, float mean, double* sdy, double* sdyx) {
  double a1[kLanes] = {}, a2[kLanes] = {};
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t off = (i * d.c + c) * d.hw;
    const float *pg = g + off, *px = xv + off;
    int64_t j = 0;
    for (; j + kLanes <= d.hw; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        a1[l] += pg[j + l];
        a2[l] += double(pg[j + l]) * (double(px[j + l]) - mean);
      }
    for (int64_t l = 0; j < d.hw; ++j, ++l) {
      a1[l] += pg[j];
      a2[l] += double(pg[j]) * (double(px[j]) - mean);
    }
  }
  *sdy += fold_lanes(a1);
  *sdyx += fold_lanes(a2);
}

// The world-invariant mode's statistics: each chunk's sums in doubles, summed in the chunk tree.
Stats tree_stats(const ChunkedGradients& cg, const float* x, const Dims& d, float* running_mean,
                 float* running_var, float momentum, float eps) {
  const std::vector<double> s =
      cg.sum_over_batch("sync_batch_norm2d", d.n, 2 * static_cast<size_t>(d.c),
                        [&](const LocalChunk& ch, double* out) {
                          parallel_for(d.c, 1, [&](int64_t c0, int64_t c1) {
                            for (int64_t c = c0; c < c1; ++c)
                              lane_shifted_sums(x, d, c, ch.begin, ch.begin + ch.count,
                                                running_mean[c], &out[c], &out[d.c + c]);
                          });
                        });
  return finish_stats(s, double(cg.plan().global_batch * d.hw), d, running_mean, running_var,
                      momentum, eps);
}

// Channel c's sum dy and sum dy (x - mean) over images [i0, i1).
void grad_sums(const float* g, const float* xv, const Dims& d, int64_t c, int64_t i0, int64_t i1,
               float mean, double* sdy, double* sdyx) {
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t off = (i * d.c + c) * d.hw;
    for (int64_t j = 0; j < d.hw; ++j) {
      *sdy += g[off + j];
      *sdyx += double(g[off + j]) * (double(xv[off + j]) - mean);
    }
  }
}

// dx of the global batch norm from the global batch's sums s (sum dy (C), sum dy (x - mean) (C)).
Tensor input_grad(const float* g, const float* xv, const float* ga, const Stats& st, const Dims& d,
                  const std::vector<double>& s) {
  const float *mean = st.mean.data<float>(), *invstd = st.invstd.data<float>();
  Tensor dx = Tensor::empty({d.n, d.c, d.hw});
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
  return dx;
}

// dy (N, C, H, W) -> dx, dgamma, dbeta of the global batch norm (host tensors).
std::vector<Tensor> sync_grads(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                               const Stats& st, const Dims& d, const BatchNormReducer& reduce) {
  const float *g = dy.data<float>(), *xv = x.data<float>();
  const float *mean = st.mean.data<float>(), *invstd = st.invstd.data<float>();
  Tensor sums = Tensor::empty({2 * d.c});  // sum dy (C), sum dy (x - mean) (C)
  float* s = sums.data<float>();
  Tensor dgamma = Tensor::empty({d.c}), dbeta = Tensor::empty({d.c});
  for (int64_t c = 0; c < d.c; ++c) {
    double sdy = 0, sdyx = 0;
    grad_sums(g, xv, d, c, 0, d.n, mean[c], &sdy, &sdyx);
    s[c] = static_cast<float>(sdy);
    s[d.c + c] = static_cast<float>(sdyx);
    dbeta.data<float>()[c] = static_cast<float>(sdy);
    dgamma.data<float>()[c] = static_cast<float>(sdyx * invstd[c]);
  }
  reduce(sums);  // over the global batch
  Tensor dx = input_grad(g, xv, gamma.data<float>(), st, d, std::vector<double>(s, s + 2 * d.c));
  return {dx.view(x.shape()), dgamma, dbeta};
}

// The world-invariant mode's backward: each chunk's sums in the chunk tree (for dx) and its
// dgamma, dbeta partials into gamma's and beta's trees (their gradients come from there).
std::vector<Tensor> tree_grads(ChunkedGradients& cg, const Tensor& dy, const Tensor& x,
                               const Tensor& gh, const Tensor& gamma, const Tensor& beta,
                               const Stats& st, const Dims& d) {
  const float *g = dy.data<float>(), *xv = x.data<float>();
  const float *mean = st.mean.data<float>(), *invstd = st.invstd.data<float>();
  const std::vector<double> s =
      cg.sum_over_batch("sync_batch_norm2d", d.n, 2 * static_cast<size_t>(d.c),
                        [&](const LocalChunk& ch, double* out) {
                          Tensor dgamma = Tensor::empty({d.c}), dbeta = Tensor::empty({d.c});
                          for (int64_t c = 0; c < d.c; ++c) {
                            lane_grad_sums(g, xv, d, c, ch.begin, ch.begin + ch.count, mean[c],
                                           &out[c], &out[d.c + c]);
                            dbeta.data<float>()[c] = static_cast<float>(out[c]);
                            dgamma.data<float>()[c] = static_cast<float>(out[d.c + c] * invstd[c]);
                          }
                          if (detail::needs(gamma)) cg.push(gamma, ch.global, dgamma);
                          if (detail::needs(beta)) cg.push(beta, ch.global, dbeta);
                        });
  Tensor dx = input_grad(g, xv, gh.data<float>(), st, d, s);
  return {dx.view(x.shape()), Tensor(), Tensor()};
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
  ChunkedGradients* cg = ChunkedGradients::current();  // world-invariant: through the chunk tree
  ENGINE_CHECK(cg || reduce, "sync_batch_norm2d: no reducer and no chunked-gradient scope");
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
      cg ? tree_stats(*cg, xh.data<float>(), d, rm.data<float>(), rv.data<float>(), momentum, eps)
         : global_stats(xh.data<float>(), d, rm.data<float>(), rv.data<float>(), reduce, momentum,
                        eps);
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
                 [xh, gh, gamma, beta, st, d, reduce, dev, cg](const Tensor& dy) {
                   ENGINE_CHECK(ChunkedGradients::current() == cg, "sync_batch_norm2d: backward ",
                                "ran outside the chunked-gradient scope its forward ran in");
                   const Tensor dyh = dy.to(Device::cpu());
                   std::vector<Tensor> g = cg ? tree_grads(*cg, dyh, xh, gh, gamma, beta, st, d)
                                              : sync_grads(dyh, xh, gh, st, d, reduce);
                   if (dev != Device::cpu())
                     for (Tensor& t : g)
                       if (t.defined()) t = t.to(dev);
                   return g;
                 });
  return out;
}

}  // namespace engine::nn
