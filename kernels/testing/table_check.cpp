// kernels/testing/table_check.cpp: the check cases (table.h check_cases): the models' layers at
// small batches, then awkward shapes. The cases marked for CUDA are the ones checked on a GPU so
// far (the models' layers and a strided convolution); the others run on the CPU only. The /engine
// cases: the CUDA kernels of CudaKernels::Engine, at every shape (CUDA only).
#include <utility>

#include "kernels/testing/case_list.h"

namespace engine::kernels::testing {
namespace {

std::string i(int64_t v) {
  return std::to_string(v);
}

// "x2x1x28x28_k3x3_s1_p1_o32": input (n, c, h, w), kernel, stride, pad, output channels.
std::string conv_name(const Conv2dShape& s) {
  return "x" + i(s.n) + "x" + i(s.c_in) + "x" + i(s.h) + "x" + i(s.w) + "_k" + i(s.kh) + "x" +
         i(s.kw) + "_s" + i(s.stride) + "_p" + i(s.pad) + "_o" + i(s.c_out);
}

// "0.25" -> "0_25"
std::string prob_name(float p) {
  std::string s = std::to_string(p);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  for (char& ch : s)
    if (ch == '.') ch = '_';
  return s;
}

void add_linear(CaseList& l) {
  // (n, in, out): the models' linear layers at batch 3 (also on CUDA), then awkward sizes.
  const int64_t shapes[][3] = {{3, 3136, 128}, {3, 128, 10}, {3, 1568, 10}, {3, 320, 50},
                               {3, 50, 10},    {3, 784, 10}, {1, 1, 1},     {3, 5, 7},
                               {64, 320, 50},  {17, 50, 10}, {5, 9, 300}};
  int k = 0;
  for (auto& s : shapes) {
    const bool model = k++ < 6;
    const std::string name = "linear/" + i(s[0]) + "x" + i(s[1]) + "x" + i(s[2]) + "/";
    for (ConvPass p : kPasses)
      l.add(name + pass_name(p), Ceiling::Compute,
            either<LinearOp, CudaLinearOp>(p, LinearShape{s[0], s[1], s[2]}), model);
    // CudaKernels::Engine's own forward and weight gradient, at every shape.
    for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardWeight})
      l.add_engine(name + pass_name(p), Ceiling::Compute,
                   either<LinearOp, CudaLinearOp>(p, LinearShape{s[0], s[1], s[2]}));
  }
}

void add_conv2d(CaseList& l) {
  using cpu::ConvAlgo;
  // n, c_in, h, w, c_out, kh, kw, stride, pad: the six conv layers of the models at batch 2 and a
  // strided one (also on CUDA), then awkward shapes.
  const Conv2dShape shapes[] = {
      {2, 1, 28, 28, 32, 3, 3, 1, 1},  {2, 32, 14, 14, 64, 3, 3, 1, 1},
      {2, 1, 28, 28, 16, 5, 5, 1, 2},  {2, 16, 14, 14, 32, 5, 5, 1, 2},
      {2, 1, 28, 28, 10, 5, 5, 1, 0},  {2, 10, 12, 12, 20, 5, 5, 1, 0},
      {2, 3, 11, 9, 5, 3, 3, 2, 1},    {2, 3, 7, 9, 5, 3, 3, 1, 1},  // odd sizes
      {3, 2, 11, 6, 17, 3, 3, 1, 0},  // 17 outputs: channel vectors padded
      {2, 4, 9, 9, 6, 5, 5, 1, 2},     {1, 1, 28, 28, 8, 5, 5, 1, 0},  // one input channel
      {2, 5, 8, 10, 33, 1, 1, 1, 0},                                   // 1x1
      {2, 3, 10, 9, 4, 2, 2, 1, 1},                                    // even kernel
      {2, 3, 9, 11, 4, 3, 5, 1, 2},     // rectangular kernel, pad > kh-1
      {2, 3, 9, 9, 5, 3, 3, 2, 1},      // stride 2
      {2, 2, 10, 7, 3, 4, 2, 3, 0},     // stride 3
      {3, 10, 12, 12, 20, 5, 5, 1, 0},  // net.conv2 at batch 3
      {1, 7, 5, 40, 3, 3, 3, 1, 1},     // rows wider than 32
      {2, 2, 3, 3, 3, 3, 3, 1, 2},      // output larger than input
      {0, 3, 5, 5, 4, 3, 3, 1, 1},      // empty batch
  };
  const std::pair<ConvAlgo, const char*> algos[] = {{ConvAlgo::Auto, "auto"},
                                                    {ConvAlgo::Flat, "flat"},
                                                    {ConvAlgo::ChannelVector, "channel_vector"},
                                                    {ConvAlgo::Im2col, "im2col"}};
  int k = 0;
  for (const Conv2dShape& s : shapes) {
    const bool model = k++ < 7;
    for (auto& [algo, algo_name] : algos)
      for (ConvPass p : kPasses) {
        if (!cpu::conv2d_algo_supported(s, algo, p)) continue;
        // On CUDA there is one algorithm (cuDNN's): the case of Auto.
        const bool cuda = model && algo == ConvAlgo::Auto;
        MakeOp cpu_make = cpu_op<Conv2dOp>(p, s, algo, Precision::FP32);
        MakeOp make = cuda ? either<Conv2dOp, CudaConv2dOp>(p, s) : cpu_make;
        l.add("conv2d/" + conv_name(s) + "/" + algo_name + "/" + pass_name(p), Ceiling::Compute,
              make, cuda);
      }
    // CudaKernels::Engine's own weight gradient (with the bias), at every shape.
    const ConvPass wgrad = ConvPass::BackwardWeight;
    l.add_engine("conv2d/" + conv_name(s) + "/" + pass_name(wgrad), Ceiling::Compute,
                 either<Conv2dOp, CudaConv2dOp>(wgrad, s));
  }
}

// The models' layers at batch 8 (big enough for the vdpbf16ps GEMM), a strided and an empty one
// (the rounding path), checked against ref:: on operands rounded to bf16. CPU, and the
// /engine twins of the passes CudaKernels::Engine runs its own way on CUDA.
void add_bf16(CaseList& l) {
  const Precision bf16 = Precision::BF16;
  const int64_t linear[][3] = {{8, 3136, 128}, {8, 128, 10}, {8, 1568, 10},
                               {8, 320, 50},   {8, 50, 10},  {8, 784, 10}};
  const Conv2dShape convs[] = {{8, 1, 28, 28, 32, 3, 3, 1, 1}, {8, 32, 14, 14, 64, 3, 3, 1, 1},
                               {8, 1, 28, 28, 16, 5, 5, 1, 2}, {8, 16, 14, 14, 32, 5, 5, 1, 2},
                               {8, 1, 28, 28, 10, 5, 5, 1, 0}, {8, 10, 12, 12, 20, 5, 5, 1, 0},
                               {2, 3, 11, 9, 5, 3, 3, 2, 1},   {0, 4, 5, 5, 4, 3, 3, 1, 1}};
  for (ConvPass p : kPasses) {
    for (auto& s : linear) {
      const std::string name =
          "linear_bf16/" + i(s[0]) + "x" + i(s[1]) + "x" + i(s[2]) + "/" + pass_name(p);
      const LinearShape shape{s[0], s[1], s[2]};
      l.add(name, Ceiling::Compute, cpu_op<LinearOp>(p, shape, bf16), false, bf16);
      // CudaKernels::Engine's bf16 forward and weight gradient (CUDA only).
      if (p != ConvPass::BackwardInput)
        l.add_engine(name, Ceiling::Compute,
                     [=](int d) { return std::make_unique<CudaLinearOp>(d, p, shape, bf16); });
    }
    for (const Conv2dShape& s : convs) {
      const std::string name = "conv2d_bf16/" + conv_name(s) + "/" + pass_name(p);
      l.add(name, Ceiling::Compute, cpu_op<Conv2dOp>(p, s, cpu::ConvAlgo::Auto, bf16), false, bf16);
      // CudaKernels::Engine's bf16 convolutions, every pass (CUDA only).
      l.add_engine(name, Ceiling::Compute,
                   [=](int d) { return std::make_unique<CudaConv2dOp>(d, p, s, bf16); });
    }
  }
}

// n, c, h, w, k, stride: the models' pools (the first three also on CUDA), then odd sizes,
// overlapping windows (k > stride), k = stride = 3, a 1x1 input, a large batch.
void add_pool_relu(CaseList& l, bool bwd) {
  const Pool2dShape pools[] = {{2, 32, 28, 28, 2, 2}, {2, 10, 24, 24, 2, 2}, {3, 3, 7, 9, 2, 2},
                               {3, 2, 7, 9, 2, 2},    {2, 3, 8, 8, 2, 2},    {2, 2, 9, 7, 3, 2},
                               {1, 4, 5, 5, 3, 1},    {2, 1, 6, 11, 3, 3},   {1, 1, 1, 1, 1, 1},
                               {64, 32, 28, 28, 2, 2}};
  int k = 0;
  for (const Pool2dShape& s : pools) {
    const std::string name = "max_pool2d/" + i(s.n) + "x" + i(s.c) + "x" + i(s.h) + "x" + i(s.w) +
                             "_k" + i(s.k) + "_s" + i(s.stride) + "/" + dir_name(bwd);
    l.add(name, Ceiling::Memory, either<MaxPool2dOp, CudaMaxPool2dOp>(bwd, s), k++ < 3);
    if (bwd)  // CudaKernels::Engine's gather, at every shape
      l.add_engine(name, Ceiling::Memory, either<MaxPool2dOp, CudaMaxPool2dOp>(bwd, s));
  }
  k = 0;
  for (int64_t n : {1, 15, 2 * 32 * 14 * 14 + 3, 100003})
    l.add("relu/" + i(n) + "/" + dir_name(bwd), Ceiling::Memory, either<ReluOp, CudaReluOp>(bwd, n),
          k++ < 3);
}

// (n, c, hw): the models' batch norms (also on CUDA), then awkward ones (one value per plane,
// one image); the loss layer; dropout at every p; dropout2d.
void add_norm_loss_dropout(CaseList& l, bool bwd) {
  const BatchNormShape norms[] = {{2, 16, 784}, {3, 32, 196}, {4, 3, 25},
                                  {2, 5, 1},    {1, 2, 9},    {7, 16, 49}};
  int k = 0;
  for (const BatchNormShape& s : norms)
    l.add("batch_norm2d_train/" + i(s.n) + "x" + i(s.c) + "x" + i(s.hw) + "/" + dir_name(bwd),
          Ceiling::Memory, either<BatchNormTrainOp, CudaBatchNormTrainOp>(bwd, s), k++ < 2);
  k = 0;
  for (auto [n, c] : {std::pair<int64_t, int64_t>{5, 10}, {1, 1}, {64, 10}, {3, 1001}, {37, 10}})
    l.add("log_softmax_nll/" + i(n) + "x" + i(c) + "/" + dir_name(bwd), Ceiling::Memory,
          either<LogSoftmaxNllOp, CudaLogSoftmaxNllOp>(bwd, n, c), k++ == 0);
  for (float p : {0.f, 0.25f, 0.5f, 0.9f, 1.f})
    for (int64_t n : {int64_t{2 * 3136 + 1}, int64_t{10007}})
      l.add("dropout/" + i(n) + "_p" + prob_name(p) + "/" + dir_name(bwd), Ceiling::Memory,
            either<DropoutOp, CudaDropoutOp>(bwd, int64_t{1}, n, p, false),
            n != 10007 && p == 0.25f);
  l.add("dropout2d/40x64_p0_5/" + dir_name(bwd), Ceiling::Memory,
        either<DropoutOp, CudaDropoutOp>(bwd, int64_t{2 * 20}, int64_t{64}, 0.5f, true), true);
  l.add("dropout2d/128x49_p0_5/" + dir_name(bwd), Ceiling::Memory,
        either<DropoutOp, CudaDropoutOp>(bwd, int64_t{2 * 64}, int64_t{49}, 0.5f, true), false);
}

// SGD and Adam over simplecnn's parameter tensors (conv1, conv2, fc1, fc2: weight, bias each),
// and the reduce step at 1, 17, 1024 and 2^20 + 5 floats.
void add_updates(CaseList& l) {
  const std::vector<int64_t> counts = {288, 32, 18432, 64, 401408, 128, 1280, 10};
  l.add("sgd_step/simplecnn", Ceiling::Memory, either<SgdOp, CudaSgdOp>(counts), true);
  l.add("adam_step/simplecnn", Ceiling::Memory, either<AdamOp, CudaAdamOp>(counts), true);
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1024}, int64_t{1 << 20} + 5})
    l.add("reduce_into_sum/" + i(n), Ceiling::MemoryOneThread,
          either<ReduceSumOp, CudaReduceSumOp>(n), true);
}

}  // namespace

std::vector<KernelCase> check_cases() {
  CaseList l;
  add_linear(l);
  add_conv2d(l);
  add_bf16(l);
  for (bool bwd : {false, true}) {
    add_pool_relu(l, bwd);
    add_norm_loss_dropout(l, bwd);
  }
  add_updates(l);
  return l.take();
}

}  // namespace engine::kernels::testing
