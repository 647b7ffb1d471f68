// data/batch.h: a batch of normalised MNIST images with labels, and assembling one from a split.
#pragma once
#include <cstdint>
#include <vector>

#include "data/mnist.h"

namespace engine::data {

struct Batch {
  int64_t size = 0;              // B (the last batch of an epoch may be smaller)
  int64_t rows = 0, cols = 0;    // H, W
  std::vector<float> images;     // (B, 1, H, W), normalised by normalize_into
  std::vector<int64_t> labels;   // (B)
  std::vector<int64_t> indices;  // (B) the samples' positions in the split
};

// Fills *out with the samples split[indices[0..n)] in that order (and the indices themselves);
// reuses out's capacity.
// Throws engine::Error when an index is outside 0..split.count-1 (naming its position).
void gather_batch(const MnistSplit& split, const int64_t* indices, int64_t n, Batch* out);

// Samples begin..end-1 in file order: for evaluation in chunks; (0, split.count) is the whole
// split.
Batch contiguous_batch(const MnistSplit& split, int64_t begin, int64_t end);

}  // namespace engine::data
