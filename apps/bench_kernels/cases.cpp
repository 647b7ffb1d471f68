// apps/bench_kernels/cases.cpp: the kernel-case table's perf cases (kernels/testing/table.h)
// under Google Benchmark, on the CPU or a CUDA device, then the data layer's. Counters: GFLOP/s
// (GEMM-shaped ops), GB/s (least traffic per call), pct_of_ceiling (of sgemm for GEMM-shaped ops,
// of the copy/triad bandwidth otherwise; one-thread bandwidth for the CPU's reduce_into; on CUDA,
// of cuBLAS sgemm and the device-to-device copy), pct_of_peak (compute cases on the CPU: of the
// measured FMA peak, the physical FP32 limit; bf16 can pass 100), check_err (the check's relative
// error). linear_bf16/ and conv2d_bf16/: the same GEMM-shaped layers in bf16. On CUDA, a row
// ending /engine is the row before it under --cuda-kernels engine (kernels/choice.h).
#include "apps/bench_kernels/cases.h"

#include <benchmark/benchmark.h>

#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "apps/bench_kernels/data_ops.h"
#include "apps/bench_kernels/shapes.h"
#include "comm/base/reduce.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/testing/table.h"

namespace engine::bench {
namespace {

using kernels::testing::Ceiling;
using kernels::testing::CheckResult;
using kernels::testing::KernelCase;

// The ceilings a case is reported against: GFLOP/s for Compute, GB/s for the others.
struct CeilingValues {
  double compute = 0, memory = 0, memory1 = 0;
  double fma_peak = 0;  // GFLOP/s; 0 where none was measured (CUDA)
  double of(Ceiling c) const {
    return c == Ceiling::Compute ? compute : c == Ceiling::Memory ? memory : memory1;
  }
};

class Case {
 public:
  // device: -1 for the CPU, else the CUDA device whose compute stream the op queues on.
  Case(std::string name, std::function<std::unique_ptr<Op>()> make, Ceiling ceiling,
       const CeilingValues& c, int device, std::vector<Failure>* failures)
      : name_(std::move(name)),
        make_(std::move(make)),
        ceiling_(ceiling),
        c_(c),
        device_(device),
        failures_(failures) {}

  void run(benchmark::State& st) {
    if (!prepare()) {
      st.SkipWithError(error_.c_str());
      return;
    }
    if (device_ < 0) {
      for (auto _ : st) op_->run();
    } else {
      // The calls only queue work: the last iteration waits for all of it, inside the timed
      // loop, so the wall time covers N calls run to completion (and the queue starts empty).
      cuda_synchronize(device_);
      benchmark::IterationCount i = 0;
      for (auto _ : st) {
        op_->run();
        if (++i == st.max_iterations) cuda_synchronize(device_);
      }
    }
    const double flops = op_->flops(), bytes = op_->bytes();
    using C = benchmark::Counter;
    if (flops > 0) st.counters["GFLOP/s"] = C(flops * 1e-9, C::kIsIterationInvariantRate);
    st.counters["GB/s"] = C(bytes * 1e-9, C::kIsIterationInvariantRate);
    const double per_call = ceiling_ == Ceiling::Compute ? flops * 1e-9 : bytes * 1e-9;
    st.counters["pct_of_ceiling"] =
        C(100.0 * per_call / c_.of(ceiling_), C::kIsIterationInvariantRate);
    if (ceiling_ == Ceiling::Compute && c_.fma_peak > 0)
      st.counters["pct_of_peak"] =
          C(100.0 * flops * 1e-9 / c_.fma_peak, C::kIsIterationInvariantRate);
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
  CeilingValues c_;
  int device_;
  std::vector<Failure>* failures_;
  std::unique_ptr<Op> op_;
  bool checked_ = false;
  CheckResult result_;
  std::string error_;
};

struct Registrar {
  CeilingValues c;
  int device;  // -1: the CPU cases; else the CUDA device
  std::vector<Failure>* failures;
  void add(const std::string& name, Ceiling ceiling, std::function<std::unique_ptr<Op>()> make) {
    auto k = std::make_shared<Case>(name, std::move(make), ceiling, c, device, failures);
    benchmark::RegisterBenchmark(name.c_str(), [k](benchmark::State& st) { k->run(st); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  // The table's perf cases that run on this device, in the table's order; on CUDA, the rows
  // of `which` (register_cuda_cases).
  void add_table(const kernels::testing::PerfInputs& in, const std::string& which = "both") {
    const std::vector<KernelCase> all = kernels::testing::perf_cases(in);
    std::set<std::string> twinned;  // library rows with an /engine twin
    for (const KernelCase& kc : all)
      if (kc.engine) twinned.insert(kc.name.substr(0, kc.name.size() - 7));  // less "/engine"
    for (const KernelCase& kc : all) {
      if (device < 0 ? !kc.cpu : !kc.cuda) continue;
      if (which == "library" && kc.engine) continue;
      if (which == "engine" && !kc.engine && twinned.count(kc.name)) continue;
      auto make = kc.make;
      const int d = device;
      add(kc.name, kc.ceiling, [make, d] { return make(d); });
    }
  }
};

// The reduce step as comm's transports call it (comm/base/reduce.h).
void comm_reduce_sum(float* dst, const float* src, int64_t count) {
  comm::reduce_into(dst, src, static_cast<size_t>(count), DType::F32, comm::ReduceOp::Sum);
}

// IDX decoding and normalisation: the data layer's, on the host only.
void add_data(Registrar& r) {
  for (bool gz : {false, true})
    r.add(std::string("idx_decode/") + (gz ? "gzip" : "raw") + "/10000_images", Ceiling::Memory,
          [=] { return make_idx_decode_op(10000, gz); });
  for (int64_t n : {64, 128})
    r.add("normalize/mnist/b" + std::to_string(n), Ceiling::Memory,
          [=] { return make_normalize_op(n); });
}

}  // namespace

void register_cpu_cases(const Ceilings& ceilings, std::vector<Failure>* failures) {
  Registrar r{{ceilings.sgemm_gflops, ceilings.bandwidth(), ceilings.bandwidth1(),
               ceilings.peak.fp32_gflops},
              -1,
              failures};
  r.add_table({model_params(), comm_reduce_sum});
  add_data(r);
}

void register_cuda_cases(const CudaCeilings& ceilings, const std::string& which,
                         std::vector<Failure>* failures) {
  Registrar r{
      {ceilings.sgemm_gflops, ceilings.copy_gbs, ceilings.copy_gbs}, ceilings.device, failures};
  r.add_table({model_params(), nullptr}, which);
}

}  // namespace engine::bench
