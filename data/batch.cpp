// data/batch.cpp: batch assembly (gather + normalise).
#include "data/batch.h"

#include "core/error.h"

namespace engine::data {

void gather_batch(const MnistSplit& split, const int64_t* indices, int64_t n, Batch* out) {
  const int64_t numel = split.image_numel();
  out->size = n;
  out->rows = split.rows;
  out->cols = split.cols;
  out->images.resize(static_cast<size_t>(n * numel));
  out->labels.resize(static_cast<size_t>(n));
  out->indices.assign(indices, indices + n);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t i = indices[b];
    ENGINE_CHECK(i >= 0 && i < split.count, "gather_batch: index ", i, " at position ", b,
                 " is outside 0..", split.count - 1, " of ", split.images_path);
    normalize_into(split.images.data() + i * numel, out->images.data() + b * numel, numel);
    out->labels[b] = split.labels[i];
  }
}

Batch contiguous_batch(const MnistSplit& split, int64_t begin, int64_t end) {
  ENGINE_CHECK(0 <= begin && begin <= end && end <= split.count, "contiguous_batch: range [", begin,
               ", ", end, ") is not inside [0, ", split.count, ") of ", split.images_path);
  const int64_t n = end - begin, numel = split.image_numel();
  Batch out;
  out.size = n;
  out.rows = split.rows;
  out.cols = split.cols;
  out.images.resize(static_cast<size_t>(n * numel));
  normalize_into(split.images.data() + begin * numel, out.images.data(), n * numel);
  out.labels.assign(split.labels.begin() + begin, split.labels.begin() + end);
  return out;
}

}  // namespace engine::data
