// tests/kernels/batch_invariance.h: the checks of batch invariance (issue 35) the kernel tests
// share. A per-sample kernel runs over the whole batch and over shares of it (1, 16, 48 or 128
// samples from any first sample, in place in the batch tensors or copied past a 64-byte boundary
// by 1 or 3 floats, on 1 or 2 threads); each share's outputs must be the batch's rows, bit for
// bit. A chunk kernel (a weight gradient) runs over one chunk of 16 samples placed at several
// offsets of batches of 16, 48 and 128; its result must have the same bits at each.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace engine::testing {

inline constexpr int64_t kInvariantBatch = 128, kInvariantChunk = 16;

// count floats starting `shift` floats past a 64-byte boundary.
class ShiftedBuffer {
 public:
  ShiftedBuffer(int64_t count, int shift) : store_(static_cast<size_t>(count + 16 + shift)) {
    const auto a = reinterpret_cast<uintptr_t>(store_.data());
    p_ = reinterpret_cast<float*>((a + 63) / 64 * 64) + shift;
  }
  float* get() { return p_; }

 private:
  std::vector<float> store_;
  float* p_;
};

// Elements whose bits differ, and the largest |a - b| among them.
struct BitDiff {
  int64_t count = 0;
  double max_abs = 0;
};
BitDiff bit_diff(const float* a, const float* b, int64_t n);

// kernel(in, out, n): the kernel over n samples, in[i] / out[j] at sample 0 of input i / output j.
using SampleKernel = std::function<void(const std::vector<const float*>& in,
                                        const std::vector<float*>& out, int64_t n)>;
// Floats per sample of each input and each output; inputs drawn from `seed` in [-1, 1).
struct SampleLayout {
  std::vector<int64_t> in, out;
  uint64_t seed = 1;
  // Inputs replaced by integer floats in [0, classes) (targets), by index; classes > 0.
  int target_input = -1;
  int64_t classes = 0;
};
void expect_per_sample_invariant(const SampleLayout& layout, const SampleKernel& kernel);
// The same check, returning the largest difference of any share (a kernel known not to be).
BitDiff per_sample_difference(const SampleLayout& layout, const SampleKernel& kernel);

// kernel(in, grad, n): the chunk's gradient (grad_count floats) from n samples at in[i].
using ChunkKernel =
    std::function<void(const std::vector<const float*>& in, float* grad, int64_t n)>;
void expect_chunk_invariant(const std::vector<int64_t>& in_per_sample, int64_t grad_count,
                            const ChunkKernel& kernel);
// The chunk's gradient in one call against two calls of 8 samples added (a blocked sum over the
// batch, as a per-thread split would give): the bits the comparison above must see.
BitDiff blocked_chunk_difference(const std::vector<int64_t>& in_per_sample, int64_t grad_count,
                                 const ChunkKernel& kernel, const ChunkKernel& add_kernel);

}  // namespace engine::testing
