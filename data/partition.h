// data/partition.h: the PyTorch tutorials' DataPartitioner, reproduced exactly (CPython's
// random.Random(seed).shuffle of the indexes, then consecutive parts of int(frac * n)).
#pragma once
#include <cstdint>
#include <vector>

namespace engine::data {

class DataPartitioner {
 public:
  // Partitions indexes 0..n-1. sizes are fractions of n; part i gets int(sizes[i] * n) elements
  // (the double product truncated, as Python's int() does). When the sizes sum past 1 the later
  // parts get what is left, possibly nothing, as Python's slicing would. Negative sizes throw.
  DataPartitioner(int64_t n, const std::vector<double>& sizes, int64_t seed = 1234);
  // Partitions the given data: part i holds data[index] for the shuffled indexes (Partition's
  // view), e.g. data 1..10, sizes {0.7, 0.2, 0.1}, seed 1234 -> {3,9,4,6,7,5,10}, {1,2}, {8}.
  DataPartitioner(const std::vector<int64_t>& data, const std::vector<double>& sizes,
                  int64_t seed = 1234);

  int64_t num_partitions() const { return static_cast<int64_t>(parts_.size()); }
  // The tutorial's partitioner.use(i): the elements of part i, in shuffled order.
  const std::vector<int64_t>& use(int64_t i) const;

 private:
  std::vector<std::vector<int64_t>> parts_;
};

// The tutorial's equal split: [1.0 / world] * world.
std::vector<double> equal_sizes(int world);

// Shortcut for the data-parallel tutorial: the part of 0..n-1 that rank takes of world equal parts.
std::vector<int64_t> partition_for_rank(int64_t n, int world, int rank, int64_t seed = 1234);

}  // namespace engine::data
