// data/partition.cpp: DataPartitioner over CPython-compatible shuffles.
#include "data/partition.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/py_random.h"

namespace engine::data {

DataPartitioner::DataPartitioner(int64_t n, const std::vector<double>& sizes, int64_t seed) {
  ENGINE_CHECK(n >= 0, "DataPartitioner: n must be >= 0, got ", n);
  std::vector<int64_t> indexes(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) indexes[i] = i;
  PyRandom rng(seed);
  rng.shuffle(indexes);
  size_t start = 0;
  for (size_t p = 0; p < sizes.size(); ++p) {
    const double frac = sizes[p];
    ENGINE_CHECK(std::isfinite(frac) && frac >= 0, "DataPartitioner: size ", p, " is ", frac,
                 "; sizes must be finite fractions >= 0");
    // int(frac * data_len): the product rounded to double, then truncated toward zero.
    const double prod = frac * static_cast<double>(n);
    const size_t len =
        prod >= static_cast<double>(n) ? static_cast<size_t>(n) : static_cast<size_t>(prod);
    const size_t take = std::min(len, indexes.size() - start);
    parts_.emplace_back(indexes.begin() + start, indexes.begin() + start + take);
    start += take;
  }
}

DataPartitioner::DataPartitioner(const std::vector<int64_t>& data, const std::vector<double>& sizes,
                                 int64_t seed)
    : DataPartitioner(static_cast<int64_t>(data.size()), sizes, seed) {
  for (auto& part : parts_) {
    for (auto& x : part) x = data[x];
  }
}

const std::vector<int64_t>& DataPartitioner::use(int64_t i) const {
  ENGINE_CHECK(i >= 0 && i < num_partitions(), "DataPartitioner::use: partition ", i,
               " out of range 0..", num_partitions() - 1);
  return parts_[i];
}

std::vector<double> equal_sizes(int world) {
  ENGINE_CHECK(world >= 1, "equal_sizes: world size must be >= 1, got ", world);
  return std::vector<double>(static_cast<size_t>(world), 1.0 / world);
}

std::vector<int64_t> partition_for_rank(int64_t n, int world, int rank, int64_t seed) {
  ENGINE_CHECK(rank >= 0 && rank < world, "partition_for_rank: rank ", rank,
               " out of range for world size ", world);
  DataPartitioner p(n, equal_sizes(world), seed);
  return p.use(rank);
}

}  // namespace engine::data
