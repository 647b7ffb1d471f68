// comm/half_grad_sync.h: gradient compression to bf16 or fp16, as DDP's bf16_compress_hook and
// fp16_compress_hook (Horovod's Compression.fp16), per bucket while backward runs: the Bucketed
// engine of comm/grad_sync.h (same layout, same hooks) whose bucket work, on the communication
// thread as soon as the bucket's last gradient is final, rounds the bucket to the 16-bit type,
// all_reduces it (sum) in that type on the wire (each ring step widens to fp32, adds, rounds once:
// comm/base/reduce.h), widens back to fp32 and divides by the world size. Half the bytes of
// float32 travel. The result is elementwise: the same whatever the bucket size. On CUDA tensors
// the buckets live on the host (each gradient's hook copies it there).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "comm/grad_sync.h"

namespace engine::comm {

class HalfGradSync : public GradSync {
 public:
  // wire: DType::BF16 or DType::F16; bucket_bytes caps a bucket (of float32 gradients).
  HalfGradSync(Communicator& comm, NamedParams params, DType wire,
               size_t bucket_bytes = kDefaultBucketBytes);
  // begin(0) then finish(): every parameter's grad is the mean over ranks, as the 16-bit sum
  // gives it. A parameter without a gradient counts as zeros.
  void reduce();
  // Bytes this rank's ring sends per reduce: 2 (W - 1) / W of the 16-bit buckets.
  int64_t bytes_per_step() const { return GradSync::bytes_per_step(0); }
  using GradSync::bytes_per_step;
};

}  // namespace engine::comm
