// comm/powersgd.cpp: PowerSGD's bucket codec on host matrices, its state, and its byte count.
#include "comm/powersgd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace engine::comm {
namespace {

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
void mul(const float* m, const std::vector<float>& q, int64_t rows, int64_t cols, int64_t r,
         std::vector<float>& out) {
  out.assign(static_cast<size_t>(rows * r), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t k = 0; k < r; ++k) out[i * r + k] += m[i * cols + j] * q[j * r + k];
}

// out (cols x r) = m^T (cols x rows) . p (rows x r)
void mul_t(const float* m, const std::vector<float>& p, int64_t rows, int64_t cols, int64_t r,
           std::vector<float>& out) {
  out.assign(static_cast<size_t>(cols * r), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t k = 0; k < r; ++k) out[j * r + k] += m[i * cols + j] * p[i * r + k];
}

// One all_reduce over the vectors of `parts`, concatenated; each gets its part of the result.
void all_reduce_parts(Communicator& c, std::vector<std::vector<float>*> parts, ReduceOp op) {
  std::vector<float> flat;
  for (auto* p : parts) flat.insert(flat.end(), p->begin(), p->end());
  if (flat.empty()) return;
  c.all_reduce(flat.data(), flat.size(), DType::F32, op);
  size_t at = 0;
  for (auto* p : parts) {
    std::copy(flat.begin() + at, flat.begin() + at + p->size(), p->begin());
    at += p->size();
  }
}

}  // namespace

class PowerSgdCodec : public BucketCodec {
 public:
  struct Matrix {
    size_t param;
    int64_t rows, cols;
    size_t offset;                   // in its bucket
    std::vector<float> error, q, p;  // (rows x cols), (cols x R), (rows x R); row-major
    bool has_q = false;
  };
  struct Part {                                      // one bucket's
    std::vector<size_t> matrices;                    // indices into matrices_
    std::vector<std::pair<size_t, size_t>> vectors;  // (offset, count): travel uncompressed
  };

  PowerSgdCodec(int rank, int64_t start, uint64_t seed) : rank_(rank), start_(start), seed_(seed) {
    ENGINE_CHECK(rank_ >= 1, "powersgd: rank must be at least 1, got ", rank_);
  }
  void plan(const NamedParams& params, const std::vector<std::vector<size_t>>& buckets,
            const std::vector<size_t>& offset_of) override;
  void reduce(Communicator& c, size_t bucket, float* flat, size_t count, int64_t step) override;
  int64_t bytes(size_t bucket, size_t count, int64_t step, int world) const override;
  std::string name() const override { return "powersgd:" + std::to_string(rank_); }

  NamedParams gather_state(Communicator& c) const;
  void load_state(int my_rank, const NamedParams& state);
  size_t compressed_count() const { return matrices_.size(); }

 private:
  void init_q(Matrix& m) const;
  void compress(Communicator& c, const Part& part, float* flat);

  int rank_;
  int64_t start_;
  uint64_t seed_;
  NamedParams params_;
  std::vector<Matrix> matrices_;  // in parameter order
  std::vector<Part> parts_;       // per bucket
};

void PowerSgdCodec::plan(const NamedParams& params, const std::vector<std::vector<size_t>>& buckets,
                         const std::vector<size_t>& offset_of) {
  params_ = params;
  std::vector<size_t> matrix_of(params.size(), SIZE_MAX);
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].second;
    const int64_t rows = p.dim() >= 2 ? p.size(0) : 0, cols = rows ? p.numel() / rows : 0;
    // As PyTorch's _should_compress with min_compression_rate 2.
    if (p.dim() < 2 || (rows + cols) * rank_ * 2 >= rows * cols) continue;
    matrix_of[i] = matrices_.size();
    Matrix m{i, rows, cols, offset_of[i], {}, {}, {}, false};
    m.error.assign(static_cast<size_t>(rows * cols), 0.0f);
    matrices_.push_back(std::move(m));
  }
  for (const auto& members : buckets) {
    Part part;
    for (size_t i : members) {
      if (matrix_of[i] != SIZE_MAX)
        part.matrices.push_back(matrix_of[i]);
      else
        part.vectors.emplace_back(offset_of[i], static_cast<size_t>(params[i].second.numel()));
    }
    parts_.push_back(std::move(part));
  }
}

void PowerSgdCodec::init_q(Matrix& m) const {
  Generator gen(seed_ * 1000003u + m.param);  // the same on every rank
  m.q.resize(static_cast<size_t>(m.cols * rank_));
  for (float& v : m.q) v = gen.uniform(-1.0f, 1.0f);
  orthogonalise(m.q, m.cols, rank_);
  m.has_q = true;
}

void PowerSgdCodec::reduce(Communicator& c, size_t bucket, float* flat, size_t count,
                           int64_t step) {
  if (step < start_) return c.all_reduce(flat, count, DType::F32, ReduceOp::Avg);
  const Part& part = parts_[bucket];
  std::vector<float> vec;
  for (auto [at, n] : part.vectors) vec.insert(vec.end(), flat + at, flat + at + n);
  if (!vec.empty()) {
    c.all_reduce(vec.data(), vec.size(), DType::F32, ReduceOp::Avg);
    size_t from = 0;
    for (auto [at, n] : part.vectors) {
      std::copy(vec.begin() + from, vec.begin() + from + n, flat + at);
      from += n;
    }
  }
  if (!part.matrices.empty()) compress(c, part, flat);
}

// The bucket's matrices, in place in flat: M = grad + error, P, Q, grad = P Q^T / W.
void PowerSgdCodec::compress(Communicator& c, const Part& part, float* flat) {
  std::vector<std::vector<float>*> ps, qs;
  for (size_t k : part.matrices) {
    Matrix& m = matrices_[k];
    float* mm = flat + m.offset;
    for (size_t e = 0; e < m.error.size(); ++e) mm[e] += m.error[e];  // error feedback
    if (!m.has_q) init_q(m);
    mul(mm, m.q, m.rows, m.cols, rank_, m.p);
    ps.push_back(&m.p);
  }
  all_reduce_parts(c, ps, ReduceOp::Sum);
  for (size_t k : part.matrices) {
    Matrix& m = matrices_[k];
    orthogonalise(m.p, m.rows, rank_);
    mul_t(flat + m.offset, m.p, m.rows, m.cols, rank_, m.q);
    qs.push_back(&m.q);
  }
  all_reduce_parts(c, qs, ReduceOp::Sum);
  const float inv_world = 1.0f / static_cast<float>(c.size());
  for (size_t k : part.matrices) {
    Matrix& m = matrices_[k];
    float* mm = flat + m.offset;
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) {
        float s = 0;
        for (int64_t r = 0; r < rank_; ++r) s += m.p[i * rank_ + r] * m.q[j * rank_ + r];
        const float approx = s * inv_world;
        m.error[i * m.cols + j] = mm[i * m.cols + j] - approx;
        mm[i * m.cols + j] = approx;
      }
  }
}

int64_t PowerSgdCodec::bytes(size_t bucket, size_t count, int64_t step, int world) const {
  if (step < start_) return ring_send_bytes(static_cast<int64_t>(count) * 4, world);
  // Three all_reduces: the vectors, every P, every Q.
  const Part& part = parts_[bucket];
  int64_t vec = 0, p = 0, q = 0;
  for (auto [at, n] : part.vectors) vec += static_cast<int64_t>(n);
  for (size_t k : part.matrices) {
    p += matrices_[k].rows * rank_;
    q += matrices_[k].cols * rank_;
  }
  return ring_send_bytes(vec * 4, world) + ring_send_bytes(p * 4, world) +
         ring_send_bytes(q * 4, world);
}

NamedParams PowerSgdCodec::gather_state(Communicator& c) const {
  NamedParams out;
  const int world = c.size();
  for (const Matrix& m : matrices_) {
    const auto& [name, p] = params_[m.param];
    std::vector<float> all(c.rank() == 0 ? m.error.size() * world : 0);
    c.gather(m.error.data(), c.rank() == 0 ? all.data() : nullptr, m.error.size(), DType::F32, 0);
    if (c.rank() != 0) continue;
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

void PowerSgdCodec::load_state(int my_rank, const NamedParams& state) {
  const std::string mine = ".powersgd_error.rank" + std::to_string(my_rank);
  for (Matrix& m : matrices_) {
    const std::string& name = params_[m.param].first;
    for (const auto& [key, t] : state) {
      const bool error = key == name + mine, q = key == name + ".powersgd_q";
      if (!error && !q) continue;
      const int64_t want = error ? m.rows * m.cols : m.cols * rank_;
      ENGINE_CHECK(t.numel() == want, "powersgd state '", key, "' has ", t.numel(),
                   " elements, this run's needs ", want, " (another PowerSGD rank?)");
      Tensor h = t.to(Device::cpu());
      std::vector<float>& dst = error ? m.error : m.q;
      dst.assign(h.data<float>(), h.data<float>() + want);
      if (q) m.has_q = true;
    }
  }
}

PowerSgd::PowerSgd(Communicator& comm, NamedParams params, int rank, int64_t start, uint64_t seed,
                   size_t bucket_bytes)
    : GradSync(comm, std::move(params), std::make_unique<PowerSgdCodec>(rank, start, seed),
               bucket_bytes) {}

PowerSgdCodec& PowerSgd::codec() const {
  return static_cast<PowerSgdCodec&>(*GradSync::codec());
}

void PowerSgd::reduce(int64_t step) {
  begin(step);
  finish();
}

NamedParams PowerSgd::gather_state() {
  return codec().gather_state(communicator());
}

void PowerSgd::load_state(const NamedParams& state) {
  codec().load_state(communicator().rank(), state);
}

size_t PowerSgd::compressed_count() const {
  return codec().compressed_count();
}

}  // namespace engine::comm
