// comm/powersgd.cpp: PowerSGD's step on host matrices, its state, and its byte count.
#include "comm/powersgd.h"

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "core/trace.h"

namespace engine::comm {
namespace {

// The parameter's gradient on the host (zeros when it has none), flat.
std::vector<float> host_grad(const Tensor& p) {
  std::vector<float> v(static_cast<size_t>(p.numel()), 0.0f);
  if (!p.grad().defined()) return v;
  Tensor h = p.grad().to(Device::cpu());
  const float* d = h.data<float>();
  v.assign(d, d + p.numel());
  return v;
}

void set_grad(Tensor p, const std::vector<float>& v) {
  Tensor g = Tensor::from_vector(v, p.shape(), p.device());
  if (p.grad().defined())
    p.grad().copy_from(g);
  else
    p.set_grad(g);
}

// Gram-Schmidt on the columns of a (rows x r), row-major, as PyTorch's
// _orthogonalize_gram_schmidt (a tiny epsilon keeps a zero column finite).
void orthogonalise(std::vector<float>& a, int64_t rows, int64_t r) {
  for (int64_t j = 0; j < r; ++j) {
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i) norm += double(a[i * r + j]) * a[i * r + j];
    const float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
    for (int64_t i = 0; i < rows; ++i) a[i * r + j] *= inv;
    for (int64_t k = j + 1; k < r; ++k) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += double(a[i * r + j]) * a[i * r + k];
      for (int64_t i = 0; i < rows; ++i) a[i * r + k] -= static_cast<float>(dot) * a[i * r + j];
    }
  }
}

// out (rows x r) = m (rows x cols) . q (cols x r)
void mul(const std::vector<float>& m, const std::vector<float>& q, int64_t rows, int64_t cols,
         int64_t r, std::vector<float>& out) {
  out.assign(static_cast<size_t>(rows * r), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t k = 0; k < r; ++k) out[i * r + k] += m[i * cols + j] * q[j * r + k];
}

// out (cols x r) = m^T (cols x rows) . p (rows x r)
void mul_t(const std::vector<float>& m, const std::vector<float>& p, int64_t rows, int64_t cols,
           int64_t r, std::vector<float>& out) {
  out.assign(static_cast<size_t>(cols * r), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t k = 0; k < r; ++k) out[j * r + k] += m[i * cols + j] * p[i * r + k];
}

int64_t ring_bytes(int64_t count, int world) {
  return world > 1 ? 2 * (world - 1) * count * 4 / world : 0;
}

}  // namespace

PowerSgd::PowerSgd(Communicator& comm, NamedParams params, int rank, int64_t start, uint64_t seed)
    : comm_(comm), params_(std::move(params)), rank_(rank), start_(start), seed_(seed) {
  ENGINE_CHECK(rank_ >= 1, "powersgd: rank must be at least 1, got ", rank_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    const int64_t rows = p.dim() >= 2 ? p.size(0) : 0, cols = rows ? p.numel() / rows : 0;
    // As PyTorch's _should_compress with min_compression_rate 2.
    if (p.dim() < 2 || (rows + cols) * rank_ * 2 >= rows * cols) {
      vectors_.push_back(i);
      continue;
    }
    Matrix m;
    m.param = i;
    m.rows = rows;
    m.cols = cols;
    m.error.assign(static_cast<size_t>(rows * cols), 0.0f);
    matrices_.push_back(std::move(m));
  }
}

void PowerSgd::reduce_uncompressed(const std::vector<size_t>& which) {
  std::vector<float> flat;
  for (size_t i : which) {
    std::vector<float> g = host_grad(params_[i].second);
    flat.insert(flat.end(), g.begin(), g.end());
  }
  if (flat.empty()) return;
  comm_.all_reduce(flat.data(), flat.size(), DType::F32, ReduceOp::Avg);
  size_t at = 0;
  for (size_t i : which) {
    const Tensor& p = params_[i].second;
    std::vector<float> g(flat.begin() + at, flat.begin() + at + p.numel());
    set_grad(p, g);
    at += static_cast<size_t>(p.numel());
  }
}

void PowerSgd::init_q(Matrix& m) {
  Generator gen(seed_ * 1000003u + m.param);  // the same on every rank
  m.q.resize(static_cast<size_t>(m.cols * rank_));
  for (float& v : m.q) v = gen.uniform(-1.0f, 1.0f);
  orthogonalise(m.q, m.cols, rank_);
  m.has_q = true;
}

void PowerSgd::reduce(int64_t step) {
  trace::Scope ts("powersgd", "comm");
  if (step < start_) {
    std::vector<size_t> all(params_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return reduce_uncompressed(all);
  }
  reduce_uncompressed(vectors_);
  if (matrices_.empty()) return;
  std::vector<std::vector<float>> ms(matrices_.size());
  std::vector<float> flat;
  for (size_t k = 0; k < matrices_.size(); ++k) {
    Matrix& m = matrices_[k];
    ms[k] = host_grad(params_[m.param].second);
    for (size_t e = 0; e < ms[k].size(); ++e) ms[k][e] += m.error[e];  // error feedback
    if (!m.has_q) init_q(m);
    mul(ms[k], m.q, m.rows, m.cols, rank_, m.p);
    flat.insert(flat.end(), m.p.begin(), m.p.end());
  }
  comm_.all_reduce(flat.data(), flat.size(), DType::F32, ReduceOp::Sum);
  size_t at = 0;
  for (Matrix& m : matrices_) {
    std::copy(flat.begin() + at, flat.begin() + at + m.p.size(), m.p.begin());
    at += m.p.size();
    orthogonalise(m.p, m.rows, rank_);
  }
  flat.clear();
  for (size_t k = 0; k < matrices_.size(); ++k) {
    Matrix& m = matrices_[k];
    mul_t(ms[k], m.p, m.rows, m.cols, rank_, m.q);
    flat.insert(flat.end(), m.q.begin(), m.q.end());
  }
  comm_.all_reduce(flat.data(), flat.size(), DType::F32, ReduceOp::Sum);
  at = 0;
  const float inv_world = 1.0f / static_cast<float>(comm_.size());
  for (size_t k = 0; k < matrices_.size(); ++k) {
    Matrix& m = matrices_[k];
    std::copy(flat.begin() + at, flat.begin() + at + m.q.size(), m.q.begin());
    at += m.q.size();
    std::vector<float> approx(ms[k].size());
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) {
        float s = 0;
        for (int64_t r = 0; r < rank_; ++r) s += m.p[i * rank_ + r] * m.q[j * rank_ + r];
        approx[i * m.cols + j] = s * inv_world;
      }
    for (size_t e = 0; e < approx.size(); ++e) m.error[e] = ms[k][e] - approx[e];
    set_grad(params_[m.param].second, approx);
  }
}

NamedParams PowerSgd::gather_state() {
  NamedParams out;
  const int world = comm_.size();
  for (const Matrix& m : matrices_) {
    const auto& [name, p] = params_[m.param];
    std::vector<float> all(comm_.rank() == 0 ? m.error.size() * world : 0);
    comm_.gather(m.error.data(), comm_.rank() == 0 ? all.data() : nullptr, m.error.size(),
                 DType::F32, 0);
    if (comm_.rank() != 0) continue;
    if (m.has_q) out.emplace_back(name + ".powersgd_q", Tensor::from_vector(m.q, {m.cols, rank_}));
    for (int r = 0; r < world; ++r) {
      std::vector<float> e(all.begin() + r * m.error.size(),
                           all.begin() + (r + 1) * m.error.size());
      out.emplace_back(name + ".powersgd_error.rank" + std::to_string(r),
                       Tensor::from_vector(e, p.shape()));
    }
  }
  return out;
}

void PowerSgd::load_state(const NamedParams& state) {
  const std::string mine = ".powersgd_error.rank" + std::to_string(comm_.rank());
  for (Matrix& m : matrices_) {
    const std::string& name = params_[m.param].first;
    for (const auto& [key, t] : state) {
      const bool error = key == name + mine, q = key == name + ".powersgd_q";
      if (!error && !q) continue;
      const int64_t want = error ? m.rows * m.cols : m.cols * rank_;
      ENGINE_CHECK(t.numel() == want, "powersgd state '", key, "' has ", t.numel(),
                   " elements, this run's needs ", want, " (another --grad-compression rank?)");
      Tensor h = t.to(Device::cpu());
      std::vector<float>& dst = error ? m.error : m.q;
      dst.assign(h.data<float>(), h.data<float>() + want);
      if (q) m.has_q = true;
    }
  }
}

int64_t PowerSgd::bytes_per_step(int64_t step) const {
  const int world = comm_.size();
  int64_t vec = 0, pq = 0;
  for (size_t i : vectors_) vec += params_[i].second.numel();
  for (const Matrix& m : matrices_) {
    if (step < start_) vec += m.rows * m.cols;
    pq += (m.rows + m.cols) * rank_;
  }
  if (step < start_) return ring_bytes(vec, world);
  // Three all_reduces: vectors, every P, every Q.
  return ring_bytes(vec, world) + ring_bytes(pq, world);
}

}  // namespace engine::comm
