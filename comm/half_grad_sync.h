// comm/half_grad_sync.h: --grad-compression bf16 | fp16, as DDP's bf16_compress_hook and
// fp16_compress_hook (Horovod's Compression.fp16): after backward every gradient is rounded to the
// 16-bit type, packed into one flat buffer and all_reduced (sum) in that type on the wire (each
// ring step widens to fp32, adds, rounds once: comm/base/reduce.h), then widened back to fp32 and
// divided by the world size. Half the bytes of float32 travel. On CUDA tensors the packing runs on
// the host.
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "comm/grad_sync.h"

namespace engine::comm {

class HalfGradSync : public GradReducer {
 public:
  // wire: DType::BF16 or DType::F16.
  HalfGradSync(Communicator& comm, NamedParams params, DType wire);
  // After backward: every parameter's grad is the mean over ranks, as the 16-bit sum gives it. A
  // parameter without a gradient counts as zeros.
  void reduce();
  // Bytes this rank's ring sends per reduce: 2 (W - 1) / W of the 16-bit buffer.
  int64_t bytes_per_step() const;
  void begin(int64_t step) override { (void)step; }
  void finish() override { reduce(); }
  int64_t bytes_per_step(int64_t step) const override { return bytes_per_step(); }
  std::string name() const override { return wire_ == DType::BF16 ? "bf16" : "fp16"; }

 private:
  Communicator& comm_;
  NamedParams params_;
  DType wire_;
  int64_t count_ = 0;  // elements of every parameter
};

}  // namespace engine::comm
