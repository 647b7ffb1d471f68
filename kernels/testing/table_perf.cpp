// kernels/testing/table_perf.cpp: the perf cases (table.h perf_cases): every layer site of the
// models (sites.h) at batch 64 and 128, each pass, as bench_kernels names and orders its rows.
// linear_bf16/ and conv2d_bf16/: the same GEMM-shaped layers in bf16 (CPU only).
#include "kernels/cpu/cpu_features.h"
#include "kernels/testing/case_list.h"

namespace engine::kernels::testing {
namespace {

std::string site(const std::string& model, const std::string& layer) {
  return layer.empty() ? model : model + "." + layer;
}
std::string bsuffix(int64_t n) {
  return "/b" + std::to_string(n);
}

constexpr int64_t kBatches[] = {64, 128};

Conv2dShape conv_shape(const ConvSite& c, int64_t n) {
  return {n, c.c_in, c.h, c.w, c.c_out, c.k, c.k, 1, c.pad};
}

void add_gemm_shaped(CaseList& l) {
  for (auto& s : linear_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches)
        l.add("linear/" + site(s.model, s.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, either<LinearOp, CudaLinearOp>(p, LinearShape{n, s.in, s.out}),
              true);
  for (auto& c : conv_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches)
        l.add("conv2d/" + site(c.model, c.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, either<Conv2dOp, CudaConv2dOp>(p, conv_shape(c, n)), true);
}

// The same layers under --precision bf16 (kernels/cpu/bf16_ops.h), on CPUs with AVX512_BF16.
void add_gemm_shaped_bf16(CaseList& l) {
  if (!cpu::has_avx512_bf16()) return;
  const Precision bf16 = Precision::BF16;
  for (auto& s : linear_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches)
        l.add("linear_bf16/" + site(s.model, s.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, cpu_op<LinearOp>(p, LinearShape{n, s.in, s.out}, bf16), false,
              bf16);
  for (auto& c : conv_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches)
        l.add("conv2d_bf16/" + site(c.model, c.layer) + "/" + pass_name(p) + bsuffix(n),
              Ceiling::Compute, cpu_op<Conv2dOp>(p, conv_shape(c, n), cpu::ConvAlgo::Auto, bf16),
              false, bf16);
}

// One batch size's pooling, relu, batch norm, loss and dropout cases.
void add_layers_at(CaseList& l, int64_t n) {
  for (auto& a : pool_sites())
    for (bool bwd : {false, true})
      l.add("max_pool2d/" + site(a.model, a.layer) + "/" + dir_name(bwd) + bsuffix(n),
            Ceiling::Memory,
            either<MaxPool2dOp, CudaMaxPool2dOp>(bwd, Pool2dShape{n, a.c, a.h, a.w, 2, 2}), true);
  for (auto& a : relu_sites())
    for (bool bwd : {false, true})
      l.add("relu/" + site(a.model, a.layer) + "/" + dir_name(bwd) + bsuffix(n), Ceiling::Memory,
            either<ReluOp, CudaReluOp>(bwd, n * a.per_sample()), true);
  for (auto& a : batchnorm_sites())
    for (bool bwd : {false, true})
      l.add("batch_norm2d_train/" + site(a.model, a.layer) + "/" + dir_name(bwd) + bsuffix(n),
            Ceiling::Memory,
            either<BatchNormTrainOp, CudaBatchNormTrainOp>(bwd, BatchNormShape{n, a.c, a.h * a.w}),
            true);
  for (auto& a : batchnorm_sites())  // CUDA runs batch norm and the pool apart
    l.add("batch_norm2d_pool/" + site(a.model, a.layer) + "/fwd" + bsuffix(n), Ceiling::Memory,
          cpu_op<BatchNormPoolOp>(Pool2dShape{n, a.c, a.h, a.w, 2, 2}), false);
  for (bool bwd : {false, true})
    l.add("log_softmax_nll/all/" + dir_name(bwd) + bsuffix(n), Ceiling::Memory,
          either<LogSoftmaxNllOp, CudaLogSoftmaxNllOp>(bwd, n, kClasses), true);
  for (auto& d : dropout_sites())
    for (bool bwd : {false, true})
      l.add(std::string(d.per_plane ? "dropout2d/" : "dropout/") + site(d.model, d.layer) + "/" +
                dir_name(bwd) + bsuffix(n),
            Ceiling::Memory,
            either<DropoutOp, CudaDropoutOp>(bwd, n * d.planes, d.plane_size, d.p, d.per_plane),
            true);
}

void add_layers(CaseList& l) {
  for (auto& c : conv_sites())
    for (int64_t n : kBatches) {
      const Conv2dShape s = conv_shape(c, n);
      if (!cpu::conv2d_pool_supported(s)) continue;  // first layers, CPU
      l.add("conv2d_pool/" + site(c.model, c.layer) + "/fwd" + bsuffix(n), Ceiling::Compute,
            cpu_op<Conv2dPoolOp>(s), false);
    }
  for (int64_t n : kBatches) add_layers_at(l, n);
}

void add_updates(CaseList& l, const PerfInputs& in) {
  for (auto& m : in.params) {
    l.add("sgd_step/" + m.model + "/all_params", Ceiling::Memory,
          either<SgdOp, CudaSgdOp>(m.counts), true);
    l.add("adam_step/" + m.model + "/all_params", Ceiling::Memory,
          either<AdamOp, CudaAdamOp>(m.counts), true);
  }
  // The reduce step, on one thread on the CPU (the device's copy bandwidth on CUDA); comm's
  // runs on the host only.
  for (int64_t nbytes = 4 << 10; nbytes <= (64 << 20); nbytes *= 4) {
    const std::string size = nbytes >= (1 << 20) ? std::to_string(nbytes >> 20) + "MB"
                                                 : std::to_string(nbytes >> 10) + "KB";
    const int64_t count = nbytes / 4;
    l.add("reduce_into_sum/kernels/" + size, Ceiling::MemoryOneThread,
          either<ReduceSumOp, CudaReduceSumOp>(count), true);
    if (in.comm_reduce)
      l.add("reduce_into_sum/comm/" + size, Ceiling::MemoryOneThread,
            cpu_op<ReduceSumOp>(count, in.comm_reduce), false);
  }
}

}  // namespace

std::vector<KernelCase> perf_cases(const PerfInputs& in) {
  CaseList l;
  add_gemm_shaped(l);
  add_gemm_shaped_bf16(l);
  add_layers(l);
  add_updates(l, in);
  return l.take();
}

}  // namespace engine::kernels::testing
