// apps/bench_kernels/cases.cpp: the CPU cases, and the same cases on a CUDA device. Counters:
// GFLOP/s (GEMM-shaped ops), GB/s (least traffic per call), pct_of_ceiling (of sgemm for
// GEMM-shaped ops, of the copy/triad bandwidth otherwise; one-thread bandwidth for the CPU's
// reduce_into; on CUDA, of cuBLAS sgemm and the device-to-device copy), pct_of_peak (compute
// cases on the CPU: of the measured FMA peak, the physical FP32 limit), check_err (the check's
// relative error). linear_bf16/ and conv2d_bf16/: the same GEMM-shaped layers in bf16.
#include "apps/bench_kernels/cases.h"

#include <benchmark/benchmark.h>

#include <exception>
#include <functional>
#include <memory>

#include "apps/bench_kernels/data_ops.h"
#include "apps/bench_kernels/ops_cuda.h"
#include "apps/bench_kernels/ops_elementwise.h"
#include "apps/bench_kernels/ops_gemm_conv.h"
#include "apps/bench_kernels/ops_optim.h"
#include "apps/bench_kernels/shapes.h"
#include "comm/base/reduce.h"
#include "kernels/cpu/cpu_features.h"

namespace engine::bench {
namespace {

enum class Ceiling { Compute, Memory, MemoryOneThread };

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
  bool cuda() const { return device >= 0; }
  void add(const std::string& name, Ceiling ceiling, std::function<std::unique_ptr<Op>()> make) {
    auto k = std::make_shared<Case>(name, std::move(make), ceiling, c, device, failures);
    benchmark::RegisterBenchmark(name.c_str(), [k](benchmark::State& st) { k->run(st); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
};

// The reduce step as comm's transports call it (comm/base/reduce.h).
void comm_reduce_sum(float* dst, const float* src, int64_t count) {
  comm::reduce_into(dst, src, static_cast<size_t>(count), DType::F32, comm::ReduceOp::Sum);
}

std::string site(const std::string& model, const std::string& layer) {
  return layer.empty() ? model : model + "." + layer;
}
std::string bsuffix(int64_t n) {
  return "/b" + std::to_string(n);
}

constexpr int64_t kBatches[] = {64, 128};
constexpr ConvPass kPasses[] = {ConvPass::Forward, ConvPass::BackwardInput,
                                ConvPass::BackwardWeight};

using MakeOp = std::function<std::unique_ptr<Op>()>;

// The CPU Op, or its CUDA twin on device d when d >= 0.
template <class CpuOp, class CudaOp, class... Args>
MakeOp either(int d, Args... args) {
  return [=]() -> std::unique_ptr<Op> {
    if (d >= 0) return std::make_unique<CudaOp>(d, args...);
    return std::make_unique<CpuOp>(args...);
  };
}

void add_gemm_shaped(Registrar& r) {
  const int d = r.device;
  for (auto& l : linear_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        kernels::LinearShape s{n, l.in, l.out};
        r.add("linear/" + site(l.model, l.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, either<LinearOp, CudaLinearOp>(d, p, s));
      }
  for (auto& c : conv_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        kernels::Conv2dShape s{n, c.c_in, c.h, c.w, c.c_out, c.k, c.k, 1, c.pad};
        r.add("conv2d/" + site(c.model, c.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, either<Conv2dOp, CudaConv2dOp>(d, p, s));
      }
}

// The same layers under --precision bf16 (kernels/cpu/bf16_ops.h), on CPUs with AVX512_BF16.
// pct_of_peak stays the share of the fp32 FMA peak, so bf16 can pass 100.
void add_gemm_shaped_bf16(Registrar& r) {
  if (r.cuda() || !kernels::cpu::has_avx512_bf16()) return;
  for (auto& l : linear_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        kernels::LinearShape s{n, l.in, l.out};
        r.add("linear_bf16/" + site(l.model, l.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, [=] { return std::make_unique<LinearOp>(p, s, Precision::BF16); });
      }
  for (auto& c : conv_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        kernels::Conv2dShape s{n, c.c_in, c.h, c.w, c.c_out, c.k, c.k, 1, c.pad};
        r.add("conv2d_bf16/" + site(c.model, c.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, [=] {
                return std::make_unique<Conv2dOp>(p, s, kernels::cpu::ConvAlgo::Auto,
                                                  Precision::BF16);
              });
      }
}

void add_layers(Registrar& r) {
  const int dev = r.device;
  for (auto& c : conv_sites())
    for (int64_t n : kBatches) {
      kernels::Conv2dShape s{n, c.c_in, c.h, c.w, c.c_out, c.k, c.k, 1, c.pad};
      if (r.cuda() || !kernels::cpu::conv2d_pool_supported(s)) continue;  // first layers, CPU
      r.add("conv2d_pool/" + site(c.model, c.layer) + "/fwd" + bsuffix(n), Ceiling::Compute,
            [=] { return std::make_unique<Conv2dPoolOp>(s); });
    }
  for (int64_t n : kBatches) {
    for (auto& a : pool_sites())
      for (bool bwd : {false, true}) {
        kernels::Pool2dShape s{n, a.c, a.h, a.w, 2, 2};
        r.add("max_pool2d/" + site(a.model, a.layer) + (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::Memory, either<MaxPool2dOp, CudaMaxPool2dOp>(dev, bwd, s));
      }
    for (auto& a : relu_sites())
      for (bool bwd : {false, true}) {
        int64_t count = n * a.per_sample();
        r.add("relu/" + site(a.model, a.layer) + (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::Memory, either<ReluOp, CudaReluOp>(dev, bwd, count));
      }
    for (auto& a : batchnorm_sites())
      for (bool bwd : {false, true}) {
        kernels::BatchNormShape s{n, a.c, a.h * a.w};
        r.add("batch_norm2d_train/" + site(a.model, a.layer) + (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::Memory, either<BatchNormTrainOp, CudaBatchNormTrainOp>(dev, bwd, s));
      }
    for (auto& a : batchnorm_sites()) {
      if (r.cuda()) break;  // CUDA runs batch norm and the pool apart
      kernels::Pool2dShape s{n, a.c, a.h, a.w, 2, 2};
      r.add("batch_norm2d_pool/" + site(a.model, a.layer) + "/fwd" + bsuffix(n), Ceiling::Memory,
            [=] { return std::make_unique<BatchNormPoolOp>(s); });
    }
    for (bool bwd : {false, true})
      r.add(std::string("log_softmax_nll/all/") + (bwd ? "bwd" : "fwd") + bsuffix(n),
            Ceiling::Memory, either<LogSoftmaxNllOp, CudaLogSoftmaxNllOp>(dev, bwd, n, kClasses));
    for (auto& d : dropout_sites())
      for (bool bwd : {false, true})
        r.add(std::string(d.per_plane ? "dropout2d/" : "dropout/") + site(d.model, d.layer) +
                  (bwd ? "/bwd" : "/fwd") + bsuffix(n),
              Ceiling::Memory,
              either<DropoutOp, CudaDropoutOp>(dev, bwd, n * d.planes, d.plane_size, d.p,
                                               d.per_plane));
  }
}

void add_updates_and_data(Registrar& r) {
  const int dev = r.device;
  for (auto& m : model_params()) {
    auto counts = m.counts;
    r.add("sgd_step/" + m.model + "/all_params", Ceiling::Memory,
          either<SgdOp, CudaSgdOp>(dev, counts));
    r.add("adam_step/" + m.model + "/all_params", Ceiling::Memory,
          either<AdamOp, CudaAdamOp>(dev, counts));
  }
  for (int64_t nbytes = 4 << 10; nbytes <= (64 << 20); nbytes *= 4) {
    std::string size = nbytes >= (1 << 20) ? std::to_string(nbytes >> 20) + "MB"
                                           : std::to_string(nbytes >> 10) + "KB";
    if (r.cuda()) {  // kernels' reduce step on the device; comm's runs on the host only
      r.add("reduce_into_sum/kernels/" + size, Ceiling::Memory,
            [=] { return std::make_unique<CudaReduceSumOp>(dev, nbytes / 4); });
      continue;
    }
    r.add("reduce_into_sum/kernels/" + size, Ceiling::MemoryOneThread,
          [=] { return std::make_unique<ReduceSumOp>(nbytes / 4); });
    r.add("reduce_into_sum/comm/" + size, Ceiling::MemoryOneThread,
          [=] { return std::make_unique<ReduceSumOp>(nbytes / 4, comm_reduce_sum); });
  }
  if (r.cuda()) return;  // IDX decoding and normalisation run on the host only
  for (bool gz : {false, true})
    r.add(std::string("idx_decode/") + (gz ? "gzip" : "raw") + "/10000_images", Ceiling::Memory,
          [=] { return make_idx_decode_op(10000, gz); });
  for (int64_t n : kBatches)
    r.add("normalize/mnist" + bsuffix(n), Ceiling::Memory, [=] { return make_normalize_op(n); });
}

}  // namespace

void register_cpu_cases(const Ceilings& ceilings, std::vector<Failure>* failures) {
  Registrar r{{ceilings.sgemm_gflops, ceilings.bandwidth(), ceilings.bandwidth1(),
               ceilings.peak.fp32_gflops},
              -1,
              failures};
  add_gemm_shaped(r);
  add_gemm_shaped_bf16(r);
  add_layers(r);
  add_updates_and_data(r);
}

void register_cuda_cases(const CudaCeilings& ceilings, std::vector<Failure>* failures) {
  Registrar r{
      {ceilings.sgemm_gflops, ceilings.copy_gbs, ceilings.copy_gbs}, ceilings.device, failures};
  add_gemm_shaped(r);
  add_layers(r);
  add_updates_and_data(r);
}

}  // namespace engine::bench
