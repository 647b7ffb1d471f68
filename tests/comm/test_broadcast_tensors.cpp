// tests/comm/test_broadcast_tensors.cpp: broadcast_tensors (BatchNorm's buffers before every step)
// sends a device's tensors of mixed dtypes and sizes in one collective, with root's values.
#include <gtest/gtest.h>

#include <vector>

#include "comm/grad_sync.h"
#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

using testing::expect_no_errors;
using testing::fval;
using testing::ival;
using testing::run_threads;

// A BatchNorm's buffers as rank r holds them: running_mean (3), running_var (3), a count (),
// and an odd-sized F32 and an empty one (offsets stay aligned).
NamedParams buffers(int r) {
  auto f32 = [&](int64_t n, int salt) {
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = fval(r, i + salt);
    return Tensor::from_vector(v, {n});
  };
  return {{"bn.running_mean", f32(3, 0)},
          {"bn.running_var", f32(3, 100)},
          {"bn.num_batches_tracked", Tensor::from_vector_i64({ival(r, 7)}, {})},
          {"odd", f32(5, 200)},
          {"empty", f32(0, 0)}};
}

TEST(BroadcastTensors, OneCollectiveCarriesEveryTensorWithRootsValues) {
  for (int W : {1, 2, 3}) {
    const int root = W - 1;
    auto comms = make_mem_communicators(W);
    expect_no_errors(run_threads(W, [&](int r) {
      Communicator& c = *comms[r];
      NamedParams mine = buffers(r), want = buffers(root);
      const uint64_t before = c.collectives_started();
      broadcast_tensors(c, mine, root);
      EXPECT_EQ(c.collectives_started() - before, 1u) << "rank " << r << " of " << W;
      for (size_t k = 0; k < mine.size(); ++k) {
        const Tensor& got = mine[k].second;
        if (got.dtype() == DType::I64)
          EXPECT_EQ(got.to_vector_i64(), want[k].second.to_vector_i64()) << mine[k].first;
        else
          EXPECT_EQ(got.to_vector(), want[k].second.to_vector()) << mine[k].first;
      }
    }));
  }
}

}  // namespace
}  // namespace engine::comm
