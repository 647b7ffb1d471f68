// kernels/testing/check.h: owns the unit of the kernel-case table (table.h): an Op (one kernel
// call on buffers it owns: check() compares it with kernels/cpu/reference.h, run() is what
// perf mode times), aligned buffers, the comparison and its tolerances. Header-only; core/ and
// kernels/ only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/reference.h"

namespace engine::kernels::testing {

// count elements of T, 64-byte aligned, zeroed.
template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(int64_t count) : count_(count) {
    size_t nbytes = (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T) + 63) / 64 * 64;
    p_ = static_cast<T*>(std::aligned_alloc(64, nbytes));
    if (!p_) throw std::bad_alloc();
    std::memset(static_cast<void*>(p_), 0, nbytes);
  }
  ~Buffer() { std::free(p_); }
  Buffer(Buffer&& o) noexcept : count_(o.count_), p_(o.p_) { o.p_ = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(count_, o.count_);
    std::swap(p_, o.p_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* get() const { return p_; }
  operator T*() const { return p_; }  // NOLINT: buffers pass straight to kernel signatures
  int64_t count() const { return count_; }
  std::vector<T> copy() const { return std::vector<T>(p_, p_ + count_); }

 private:
  int64_t count_ = 0;
  T* p_ = nullptr;
};

// Uniform values in [lo, hi) from Philox: the same on every machine.
inline Buffer<float> uniform(int64_t count, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Buffer<float> b(count);
  kernels::ref::fill_uniform(b, count, seed, lo, hi);
  return b;
}

// One comparison: error = max |got - want| / max |want| (relative to the data's scale, as
// ref::max_rel_error), with the element where |got - want| is largest.
struct CheckResult {
  std::string what;  // the output compared ("y", "dw", ...)
  double err = 0, tol = 0;
  int64_t index = -1;  // worst element, -1 when none differs
  float got = 0, want = 0;
  std::string error{};  // what the check threw (table.h run_check), else ""
  bool ok() const { return error.empty() && err <= tol; }
  std::string message() const {
    if (!error.empty()) return what + " threw: " + error;
    std::ostringstream os;
    os.precision(9);
    os << what << ": max rel err " << err << " (tol " << tol << ")";
    if (index >= 0) os << ", worst element " << index << ": got " << got << ", want " << want;
    return os.str();
  }
};

// NaN where the reference has NaN counts as equal; NaN elsewhere is an infinite error.
inline CheckResult compare(const std::string& what, const float* got, const float* want,
                           int64_t count, double tol) {
  CheckResult r{what, 0.0, tol};
  double worst = 0.0, scale = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    bool gn = std::isnan(got[i]), wn = std::isnan(want[i]);
    double d = gn || wn ? (gn == wn ? 0.0 : std::numeric_limits<double>::infinity())
                        : std::fabs(double(got[i]) - double(want[i]));
    if (!wn) scale = std::max(scale, std::fabs(double(want[i])));
    if (d > worst) {
      worst = d;
      r.index = i;
      r.got = got[i];
      r.want = want[i];
    }
  }
  r.err = worst == 0.0 ? 0.0 : worst / std::max(scale, 1e-30);
  return r;
}

// The result that is furthest outside (or closest to) its tolerance.
inline CheckResult worst_of(const std::vector<CheckResult>& rs) {
  CheckResult w = rs.at(0);
  auto ratio = [](const CheckResult& r) { return r.tol > 0 ? r.err / r.tol : r.err * 1e30; };
  for (auto& r : rs)
    if (ratio(r) > ratio(w)) w = r;
  return w;
}

// Tolerances (relative to max |want|). A sum of k float products against the double reference:
// rounding grows like sqrt(k) for blocked sums; 4e-7 * sqrt(k) + 1e-6 leaves headroom over what
// sgemm and the direct convolutions show (about 1e-7 * sqrt(k)).
inline double sum_tol(int64_t k) {
  return 4e-7 * std::sqrt(double(std::max<int64_t>(k, 1))) + 1e-6;
}
constexpr double kExact = 0.0;  // relu, max-pool, dropout, reduce: same floats in, same out
constexpr double kBatchNormTol = 1e-5;
constexpr double kLossTol = 1e-5;
constexpr double kSgdTol = 1e-6;   // fmaf in float vs the double formula: an ulp or two
constexpr double kAdamTol = 1e-5;  // float sqrt and division vs double
// Batch norm's dx subtracts the means of dy and dy * xhat over the m values of a channel: with few
// values they nearly cancel, and the error relative to max |dx| grows (2.4e-5 at m = 2).
inline double batch_norm_dx_tol(int64_t m) {
  return m < 16 ? 1e-4 : kBatchNormTol;
}

// Integer outputs compared through floats (exact for |v| < 2^24).
template <class I>
inline CheckResult compare_ints(const std::string& what, const I* got, const I* want,
                                int64_t count) {
  std::vector<float> g(got, got + count), w(want, want + count);
  return compare(what, g.data(), w.data(), count, kExact);
}

// The arithmetic a case runs in: fp32, or bf16 operands with fp32 sums (kernels/cpu/bf16_ops.h).
enum class Precision { FP32, BF16 };

// One kernel call on buffers the op owns: check() once, then run() in the timed loop.
class Op {
 public:
  virtual ~Op() = default;
  // The kernel on the op's buffers: what is timed.
  virtual void run() = 0;
  // Runs the kernel and the reference on the same inputs and compares every output.
  virtual CheckResult check() = 0;
  virtual double flops() const { return 0.0; }  // per run(); 0 for memory-bound ops
  virtual double bytes() const = 0;             // least memory traffic of one run()
};

}  // namespace engine::kernels::testing
