// apps/bench_kernels/cases.cpp: the CPU cases. Counters: GFLOP/s (GEMM-shaped ops), GB/s (least
// traffic per call), pct_of_ceiling (of sgemm for GEMM-shaped ops, of the copy/triad bandwidth
// otherwise; one-thread bandwidth for reduce_into), check_err (the check's relative error).
#include "apps/bench_kernels/cases.h"

#include <benchmark/benchmark.h>

#include <exception>
#include <functional>
#include <memory>

#include "apps/bench_kernels/data_ops.h"
#include "apps/bench_kernels/ops_elementwise.h"
#include "apps/bench_kernels/ops_gemm_conv.h"
#include "apps/bench_kernels/ops_optim.h"
#include "apps/bench_kernels/shapes.h"
#include "comm/reduce.h"

namespace engine::bench {
namespace {

enum class Ceiling { kCompute, kMemory, kMemoryOneThread };

class Case {
 public:
  Case(std::string name, std::function<std::unique_ptr<Op>()> make, Ceiling ceiling,
       const Ceilings& c, std::vector<Failure>* failures)
      : name_(std::move(name)),
        make_(std::move(make)),
        ceiling_(ceiling),
        c_(c),
        failures_(failures) {}

  void run(benchmark::State& st) {
    if (!prepare()) {
      st.SkipWithError(error_.c_str());
      return;
    }
    for (auto _ : st) op_->run();
    const double flops = op_->flops(), bytes = op_->bytes();
    using C = benchmark::Counter;
    if (flops > 0) st.counters["GFLOP/s"] = C(flops * 1e-9, C::kIsIterationInvariantRate);
    st.counters["GB/s"] = C(bytes * 1e-9, C::kIsIterationInvariantRate);
    const double per_call = ceiling_ == Ceiling::kCompute ? flops * 1e-9 : bytes * 1e-9;
    const double ceil = ceiling_ == Ceiling::kCompute  ? c_.sgemm_gflops
                        : ceiling_ == Ceiling::kMemory ? c_.bandwidth()
                                                       : c_.bandwidth1();
    st.counters["pct_of_ceiling"] = C(100.0 * per_call / ceil, C::kIsIterationInvariantRate);
    st.counters["check_err"] = C(result_.err);
  }

 private:
  // Builds the Op (only this case's buffers stay alive) and checks it once.
  bool prepare() {
    if (checked_ && !result_.ok()) return false;
    if (live_ != this) {
      if (live_) live_->op_.reset();
      live_ = this;
    }
    try {
      if (!op_) op_ = make_();
      if (!checked_) {
        checked_ = true;
        result_ = op_->check();
        if (!result_.ok()) fail("check failed: " + result_.message());
      }
    } catch (const std::exception& e) {
      checked_ = true;
      result_.err = result_.tol + 1;  // never time it
      fail(std::string("check threw: ") + e.what());
    }
    return result_.ok();
  }
  void fail(const std::string& message) {
    error_ = message;
    failures_->push_back({name_, message});
    op_.reset();
  }

  static inline Case* live_ = nullptr;
  std::string name_;
  std::function<std::unique_ptr<Op>()> make_;
  Ceiling ceiling_;
  const Ceilings& c_;
  std::vector<Failure>* failures_;
  std::unique_ptr<Op> op_;
  bool checked_ = false;
  CheckResult result_;
  std::string error_;
};

struct Registrar {
  const Ceilings& c;
  std::vector<Failure>* failures;
  void add(const std::string& name, Ceiling ceiling, std::function<std::unique_ptr<Op>()> make) {
    auto k = std::make_shared<Case>(name, std::move(make), ceiling, c, failures);
    benchmark::RegisterBenchmark(name.c_str(), [k](benchmark::State& st) { k->run(st); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
};

// The reduce step as comm's transports call it (comm/reduce.h).
void comm_reduce_sum(float* dst, const float* src, int64_t count) {
  comm::reduce_into(dst, src, static_cast<size_t>(count), DType::F32, comm::ReduceOp::SUM);
}

std::string site(const std::string& model, const std::string& layer) {
  return layer.empty() ? model : model + "." + layer;
}
std::string bsuffix(int64_t n) {
  return "/b" + std::to_string(n);
}

constexpr int64_t kBatches[] = {64, 128};
constexpr Pass kPasses[] = {Pass::kForward, Pass::kBackwardData, Pass::kBackwardWeight};

void add_gemm_shaped(Registrar& r) {
  for (auto& l : linear_sites())
    for (Pass p : kPasses)
      for (int64_t n : kBatches) {
        kernels::LinearShape s{n, l.in, l.out};
        r.add("linear/" + site(l.model, l.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::kCompute, [=] { return std::make_unique<LinearOp>(p, s); });
      }
  for (auto& c : conv_sites())
    for (Pass p : kPasses)
      for (int64_t n : kBatches) {
        kernels::Conv2dShape s{n, c.c_in, c.h, c.w, c.c_out, c.k, c.k, 1, c.pad};
        r.add("conv2d/" + site(c.model, c.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::kCompute, [=] { return std::make_unique<Conv2dOp>(p, s); });
      }
}

void add_layers(Registrar& r) {
  for (int64_t n : kBatches) {
    for (auto& a : pool_sites())
      for (bool bwd : {false, true}) {
        kernels::Pool2dShape s{n, a.c, a.h, a.w, 2, 2};
        r.add("max_pool2d/" + site(a.model, a.layer) + (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::kMemory, [=] { return std::make_unique<MaxPool2dOp>(bwd, s); });
      }
    for (auto& a : relu_sites())
      for (bool bwd : {false, true}) {
        int64_t count = n * a.per_sample();
        r.add("relu/" + site(a.model, a.layer) + (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::kMemory, [=] { return std::make_unique<ReluOp>(bwd, count); });
      }
    for (auto& a : batchnorm_sites())
      for (bool bwd : {false, true}) {
        kernels::BatchNormShape s{n, a.c, a.h * a.w};
        r.add("batch_norm2d_train/" + site(a.model, a.layer) + (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::kMemory, [=] { return std::make_unique<BatchNormTrainOp>(bwd, s); });
      }
    for (bool bwd : {false, true})
      r.add(std::string("log_softmax_nll/all/") + (bwd ? "bwd" : "fwd") + bsuffix(n),
            Ceiling::kMemory, [=] { return std::make_unique<LogSoftmaxNllOp>(bwd, n, kClasses); });
    for (auto& d : dropout_sites())
      for (bool bwd : {false, true})
        r.add(std::string(d.per_plane ? "dropout2d/" : "dropout/") + site(d.model, d.layer) +
                  (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::kMemory, [=] {
                return std::make_unique<DropoutOp>(bwd, n * d.planes, d.plane_size, d.p,
                                                   d.per_plane);
              });
  }
}

void add_updates_and_data(Registrar& r) {
  for (auto& m : model_params()) {
    auto counts = m.counts;
    r.add("sgd_step/" + m.model + "/all_params", Ceiling::kMemory,
          [=] { return std::make_unique<SgdOp>(counts); });
    r.add("adam_step/" + m.model + "/all_params", Ceiling::kMemory,
          [=] { return std::make_unique<AdamOp>(counts); });
  }
  for (int64_t nbytes = 4 << 10; nbytes <= (64 << 20); nbytes *= 4) {
    std::string size = nbytes >= (1 << 20) ? std::to_string(nbytes >> 20) + "MB"
                                           : std::to_string(nbytes >> 10) + "KB";
    r.add("reduce_into_sum/kernels/" + size, Ceiling::kMemoryOneThread,
          [=] { return std::make_unique<ReduceSumOp>(nbytes / 4); });
    r.add("reduce_into_sum/comm/" + size, Ceiling::kMemoryOneThread,
          [=] { return std::make_unique<ReduceSumOp>(nbytes / 4, comm_reduce_sum); });
  }
  for (bool gz : {false, true})
    r.add(std::string("idx_decode/") + (gz ? "gzip" : "raw") + "/10000_images", Ceiling::kMemory,
          [=] { return make_idx_decode_op(10000, gz); });
  for (int64_t n : kBatches)
    r.add("normalize/mnist" + bsuffix(n), Ceiling::kMemory, [=] { return make_normalize_op(n); });
}

}  // namespace

void register_cpu_cases(const Ceilings& ceilings, std::vector<Failure>* failures) {
  Registrar r{ceilings, failures};
  add_gemm_shaped(r);
  add_layers(r);
  add_updates_and_data(r);
}

}  // namespace engine::bench
