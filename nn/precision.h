// nn/precision.h: which precision the multiplying layers run in, chosen per op as PyTorch's CPU
// autocast chooses: under Precision::BF16, conv2d and linear multiply bf16-rounded operands with
// fp32 accumulation (kernels' *_bf16 functions), their backward too; softmax, losses, BatchNorm
// statistics, pooling, the optimizer and the weights themselves stay fp32 (fp32 master weights,
// so checkpoints move between precisions and to PyTorch). One setting per process, like
// torch.set_float32_matmul_precision: train sets it from its precision option before the model
// runs. An op's backward uses the precision its forward ran in. Two kinds of layer stay fp32 under
// BF16 because bf16 did not speed them up: linear layers of fewer than 16 outputs or 8192 weights,
// and convolutions of one input channel (nn/functional.cpp, runs_in_bf16).
#pragma once
#include <string>

namespace engine::nn {

enum class Precision { F32, BF16 };

// Sets the precision. The caller checks the device first: the CPU's bf16 kernels throw on a CPU
// without AVX512_BF16 (kernels/cpu/cpu_features.h, require_avx512_bf16).
void set_matmul_precision(Precision p);
Precision matmul_precision();

// Sets the precision for its lifetime, then puts the previous one back (tests).
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};

}  // namespace engine::nn
