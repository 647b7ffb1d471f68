// tests/parallel/parallel_test_util.h: what the parallel tests share: ranks as threads over the
// in-memory transport (tests/comm's), a small model and batches unique to rank and step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/rendezvous/rendezvous.h"
#include "core/rng.h"
#include "data/upload.h"
#include "nn/models.h"
#include "tests/comm/comm_test_util.h"

namespace engine::parallel::testing {

using comm::testing::expect_no_errors;
using comm::testing::run_threads;

// The tutorials' linear model (784 -> 10), seeded alike on every rank.
struct SmallModel {
  Generator init{1234}, dropout{99};
  std::unique_ptr<nn::Model> model = nn::make_model("linear", {}, init, dropout);
};

// A batch of n MNIST-shaped images whose values depend on (rank, step): ranks see other data.
inline data::DeviceBatch batch(int rank, int step, int64_t n) {
  std::vector<float> px(static_cast<size_t>(n * 28 * 28));
  for (size_t i = 0; i < px.size(); ++i)
    px[i] = static_cast<float>((i * 7 + static_cast<size_t>(rank) * 131 + step * 17) % 97) / 97.f;
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[i] = (i * 3 + rank + step) % 10;
  data::DeviceBatch b;
  b.images = Tensor::from_vector(px, {n, 1, 28, 28}, Device::cpu());
  b.labels = Tensor::from_vector_i64(labels, {n}, Device::cpu());
  b.size = n;
  return b;
}

// Every parameter's values, in order, for bit-for-bit comparisons.
inline std::vector<float> flat_params(nn::Module& m) {
  std::vector<float> out;
  for (const auto& [name, p] : m.named_parameters()) {
    const std::vector<float> v = p.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace engine::parallel::testing
