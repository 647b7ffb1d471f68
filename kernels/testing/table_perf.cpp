// kernels/testing/table_perf.cpp: the perf cases (table.h perf_cases): every layer site of the
// models (sites.h) at batch 64 and 128, each pass, as bench_kernels names and orders its rows.
// linear_bf16/ and conv2d_bf16/: the same GEMM-shaped layers in bf16 (the CPU's rows where it
// has AVX512_BF16; CUDA's always). A row ending
// /engine: the CUDA row before it under CudaKernels::Engine (kernels/choice.h).
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

// Where CudaKernels::Engine has kernels of its own: linear's forward and weight gradient,
// conv2d's weight gradient.
bool engine_linear(ConvPass p) {
  return p != ConvPass::BackwardInput;
}
bool engine_conv(ConvPass p) {
  return p == ConvPass::BackwardWeight;
}

// Each row, then its /engine twin (CUDA only) where the engine has a kernel of its own.
void add_gemm_shaped(CaseList& l) {
  for (auto& s : linear_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        const std::string name =
            "linear/" + site(s.model, s.layer) + "/" + pass_name(p) + bsuffix(n);
        MakeOp make = either<LinearOp, CudaLinearOp>(p, LinearShape{n, s.in, s.out});
        l.add(name, Ceiling::Compute, make, true);
        if (engine_linear(p)) l.add_engine(name, Ceiling::Compute, make);
      }
  for (auto& c : conv_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        const std::string name =
            "conv2d/" + site(c.model, c.layer) + "/" + pass_name(p) + bsuffix(n);
        MakeOp make = either<Conv2dOp, CudaConv2dOp>(p, conv_shape(c, n));
        l.add(name, Ceiling::Compute, make, true);
        if (engine_conv(p)) l.add_engine(name, Ceiling::Compute, make);
      }
}

// The same layers under bf16 precision: on the CPU where it has AVX512_BF16 (kernels/cpu/
// bf16_ops.h), and on CUDA (kernels/cuda/bf16_ops.cu), each CUDA row then its /engine twin where
// CudaKernels::Engine runs it its own way (every bf16 conv2d pass, linear's forward and weight
// gradient).
void add_gemm_shaped_bf16(CaseList& l) {
  const Precision bf16 = Precision::BF16;
  const bool cpu = cpu::has_avx512_bf16();
  for (auto& s : linear_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        const LinearShape shape{n, s.in, s.out};
        MakeOp make = [=](int d) -> std::unique_ptr<Op> {
          if (d >= 0) return std::make_unique<CudaLinearOp>(d, p, shape, bf16);
          return std::make_unique<LinearOp>(p, shape, bf16);
        };
        const std::string name =
            "linear_bf16/" + site(s.model, s.layer) + "/" + pass_name(p) + bsuffix(n);
        l.add(name, Ceiling::Compute, make, true, bf16, cpu);
        if (engine_linear(p)) l.add_engine(name, Ceiling::Compute, make);
      }
  for (auto& c : conv_sites())
    for (ConvPass p : kPasses)
      for (int64_t n : kBatches) {
        const Conv2dShape shape = conv_shape(c, n);
        MakeOp make = [=](int d) -> std::unique_ptr<Op> {
          if (d >= 0) return std::make_unique<CudaConv2dOp>(d, p, shape, bf16);
          return std::make_unique<Conv2dOp>(p, shape, cpu::ConvAlgo::Auto, bf16);
        };
        const std::string name =
            "conv2d_bf16/" + site(c.model, c.layer) + "/" + pass_name(p) + bsuffix(n);
        l.add(name, Ceiling::Compute, make, true, bf16, cpu);
        l.add_engine(name, Ceiling::Compute, make);
      }
}

// One batch size's pooling, relu, batch norm, loss and dropout cases.
void add_layers_at(CaseList& l, int64_t n) {
  for (auto& a : pool_sites())
    for (bool bwd : {false, true}) {
      const std::string name =
          "max_pool2d/" + site(a.model, a.layer) + "/" + dir_name(bwd) + bsuffix(n);
      MakeOp make = either<MaxPool2dOp, CudaMaxPool2dOp>(bwd, Pool2dShape{n, a.c, a.h, a.w, 2, 2});
      l.add(name, Ceiling::Memory, make, true);
      if (bwd) l.add_engine(name, Ceiling::Memory, make);
    }
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
