// kernels/cpu/reference.cpp: reference implementations for checks: pooling, activations,
// dropout, batch norm, softmax and loss, optimizers, sums. Plain loops, sums in double.
// Convolution is in conv2d/reference.cpp, linear in reference_linear.cpp.
#include "kernels/cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/rng.h"

namespace engine::kernels::ref {

void max_pool2d_forward(const float* x, float* y, int32_t* arg, const Pool2dShape& s) {
  const int64_t oh = s.oh(), ow = s.ow();
  for (int64_t p = 0; p < s.n * s.c; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        float best = -INFINITY;
        int64_t at = i * s.stride * s.w + j * s.stride;
        for (int64_t a = 0; a < s.k; ++a)
          for (int64_t b = 0; b < s.k; ++b) {
            int64_t idx = (i * s.stride + a) * s.w + j * s.stride + b;
            float v = x[p * s.h * s.w + idx];
            if (v > best || std::isnan(v)) {
              best = v;
              at = idx;
            }
          }
        y[(p * oh + i) * ow + j] = best;
        arg[(p * oh + i) * ow + j] = static_cast<int32_t>(at);
      }
}

void max_pool2d_backward(const float* dy, const int32_t* arg, float* dx, const Pool2dShape& s) {
  const int64_t out = s.oh() * s.ow();
  for (int64_t i = 0; i < s.n * s.c * s.h * s.w; ++i) dx[i] = 0.f;
  for (int64_t p = 0; p < s.n * s.c; ++p)
    for (int64_t i = 0; i < out; ++i) dx[p * s.h * s.w + arg[p * out + i]] += dy[p * out + i];
}

void relu_forward(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = std::isnan(x[i]) ? x[i] : (x[i] > 0.f ? x[i] : 0.f);
}

void relu_backward(const float* dy, const float* y, float* dx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

void dropout_forward(const float* x, float* y, int64_t count, float p, uint64_t seed,
                     uint64_t offset) {
  for (int64_t i = 0; i < count; ++i) {
    bool keep = philox_uniform(seed, offset, static_cast<uint64_t>(i)) >= p;
    y[i] = keep ? x[i] * (1.f / static_cast<float>(1.0 - p)) : 0.f;
  }
}

void dropout2d_forward(const float* x, float* y, int64_t planes, int64_t plane_size, float p,
                       uint64_t seed, uint64_t offset) {
  for (int64_t q = 0; q < planes; ++q) {
    bool keep = philox_uniform(seed, offset, static_cast<uint64_t>(q)) >= p;
    for (int64_t i = 0; i < plane_size; ++i) {
      int64_t at = q * plane_size + i;
      y[at] = keep ? x[at] * (1.f / static_cast<float>(1.0 - p)) : 0.f;
    }
  }
}

namespace {

// Mean and biased variance of channel c of x (N, C, HW), in double.
void channel_stats(const float* x, const BatchNormShape& s, int64_t c, double* mean, double* var) {
  double sum = 0.0, sq = 0.0;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t i = 0; i < s.hw; ++i) sum += x[(n * s.c + c) * s.hw + i];
  *mean = sum / double(s.count());
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t i = 0; i < s.hw; ++i) {
      double d = x[(n * s.c + c) * s.hw + i] - *mean;
      sq += d * d;
    }
  *var = sq / double(s.count());
}

}  // namespace

void batch_norm_train_forward(const float* x, const float* gamma, const float* beta, float* y,
                              float* mean, float* invstd, float* running_mean, float* running_var,
                              const BatchNormShape& s, float momentum, float eps) {
  const double m = double(s.count());
  for (int64_t c = 0; c < s.c; ++c) {
    double mu, var;
    channel_stats(x, s, c, &mu, &var);
    double is = 1.0 / std::sqrt(var + eps);
    mean[c] = static_cast<float>(mu);
    invstd[c] = static_cast<float>(is);
    if (running_mean) running_mean[c] = float((1 - momentum) * running_mean[c] + momentum * mu);
    if (running_var)
      running_var[c] = float((1 - momentum) * running_var[c] + momentum * var * m / (m - 1));
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t i = 0; i < s.hw; ++i) {
        int64_t at = (n * s.c + c) * s.hw + i;
        y[at] = float((x[at] - mu) * is * (gamma ? gamma[c] : 1.f) + (beta ? beta[c] : 0.f));
      }
  }
}

void batch_norm_eval_forward(const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y,
                             const BatchNormShape& s, float eps) {
  for (int64_t c = 0; c < s.c; ++c) {
    double is = 1.0 / std::sqrt(double(running_var[c]) + eps);
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t i = 0; i < s.hw; ++i) {
        int64_t at = (n * s.c + c) * s.hw + i;
        y[at] = float((x[at] - running_mean[c]) * is * (gamma ? gamma[c] : 1.f) +
                      (beta ? beta[c] : 0.f));
      }
  }
}

void batch_norm_backward(const float* dy, const float* x, const float* gamma, float* dx,
                         float* dgamma, float* dbeta, const BatchNormShape& s, float eps) {
  const double m = double(s.count());
  for (int64_t c = 0; c < s.c; ++c) {
    double mu, var;
    channel_stats(x, s, c, &mu, &var);
    double is = 1.0 / std::sqrt(var + eps), sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t i = 0; i < s.hw; ++i) {
        int64_t at = (n * s.c + c) * s.hw + i;
        sum_dy += dy[at];
        sum_dy_xhat += dy[at] * (x[at] - mu) * is;
      }
    if (dgamma) dgamma[c] = float(sum_dy_xhat);
    if (dbeta) dbeta[c] = float(sum_dy);
    double w = gamma ? gamma[c] : 1.0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t i = 0; i < s.hw; ++i) {
        int64_t at = (n * s.c + c) * s.hw + i;
        double xhat = (x[at] - mu) * is;
        dx[at] = float(w * is * (dy[at] - sum_dy / m - xhat * sum_dy_xhat / m));
      }
  }
}

void log_softmax_forward(const float* x, float* y, int64_t n, int64_t c) {
  for (int64_t r = 0; r < n; ++r) {
    double m = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < c; ++j) m = std::max<double>(m, x[r * c + j]);
    for (int64_t j = 0; j < c; ++j) s += std::exp(x[r * c + j] - m);
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = float(x[r * c + j] - m - std::log(s));
  }
}

void log_softmax_backward(const float* dy, const float* y, float* dx, int64_t n, int64_t c) {
  for (int64_t r = 0; r < n; ++r) {
    double s = 0.0;
    for (int64_t j = 0; j < c; ++j) s += dy[r * c + j];
    for (int64_t j = 0; j < c; ++j)
      dx[r * c + j] = float(dy[r * c + j] - std::exp(double(y[r * c + j])) * s);
  }
}

float nll_loss_forward(const float* logp, const int64_t* target, int64_t n, int64_t c) {
  if (n == 0) return std::numeric_limits<float>::quiet_NaN();
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += -logp[i * c + target[i]];
  return float(s / double(n));
}

void nll_loss_backward(float dloss, const int64_t* target, float* dlogp, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n * c; ++i) dlogp[i] = 0.f;
  for (int64_t i = 0; i < n; ++i) dlogp[i * c + target[i]] = float(-double(dloss) / double(n));
}

void argmax_rows(const float* x, int64_t n, int64_t c, int64_t* out) {
  for (int64_t r = 0; r < n; ++r) {
    int64_t best = 0;
    for (int64_t j = 0; j < c; ++j) {
      if (std::isnan(x[r * c + j])) {
        best = j;
        break;
      }
      if (x[r * c + j] > x[r * c + best]) best = j;
    }
    out[r] = best;
  }
}

void sgd_step(float* p, const float* g, float* buf, int64_t count, const SgdConfig& c, bool first) {
  for (int64_t i = 0; i < count; ++i) {
    double d = double(g[i]) + c.weight_decay * p[i];
    if (c.momentum != 0.0) {
      double b = first ? d : c.momentum * buf[i] + (1.0 - c.dampening) * d;
      buf[i] = float(b);
      d = c.nesterov ? d + c.momentum * b : b;
    }
    p[i] = float(p[i] - c.lr * d);
  }
}

void adam_step(float* p, const float* g, float* m, float* v, int64_t count, const AdamConfig& c,
               int64_t step) {
  const double bc1 = 1.0 - std::pow(c.beta1, double(step));
  const double bc2 = 1.0 - std::pow(c.beta2, double(step));
  for (int64_t i = 0; i < count; ++i) {
    double grad = double(g[i]) + c.weight_decay * p[i];
    double mi = c.beta1 * m[i] + (1.0 - c.beta1) * grad;
    double vi = c.beta2 * v[i] + (1.0 - c.beta2) * grad * grad;
    m[i] = float(mi);
    v[i] = float(vi);
    double denom = std::sqrt(vi) / std::sqrt(bc2) + c.eps;
    p[i] = float(p[i] - c.lr / bc1 * mi / denom);
  }
}

double sum(const float* x, int64_t count) {
  double s = 0.0;
  for (int64_t i = 0; i < count; ++i) s += x[i];
  return s;
}

void fill_uniform(float* x, int64_t count, uint64_t seed, float lo, float hi) {
  for (int64_t i = 0; i < count; ++i)
    x[i] = lo + (hi - lo) * philox_uniform(seed, 0, static_cast<uint64_t>(i));
}

double max_rel_error(const float* got, const float* want, int64_t count) {
  double diff = 0.0, scale = 1e-30;
  for (int64_t i = 0; i < count; ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) {
      if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::fabs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return diff / scale;
}

}  // namespace engine::kernels::ref
