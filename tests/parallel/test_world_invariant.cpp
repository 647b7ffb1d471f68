// tests/parallel/test_world_invariant.cpp: the world-invariant step (parallel/tree_reducer.h with
// parallel/train_step.h): W = 1 .. 4 ranks as threads over the in-memory transport (and over
// shared memory and TCP), each stepping on its chunks of the same global batches, end with the
// weights (and BatchNorm's running statistics) of one process bit for bit, for every model, SGD
// and Adam, accumulation, ZeRO-1 and bf16 precision. A control with the bucketed ring reducer
// differs and two swapped images are caught (the test can fail), and a step that mixes the modes
// is refused.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/rendezvous/mem_store.h"
#include "core/chunk_tree.h"
#include "core/error.h"
#include "kernels/cpu/cpu_features.h"
#include "nn/precision.h"
#include "parallel/train_step.h"
#include "parallel/tree_reducer.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

constexpr int64_t kChunk = 16;

struct Job {
  std::string model = "linear";
  int64_t batch = 96;  // global
  int steps = 3;
  int64_t accumulate = 1;
  OptimizerKind optimizer = OptimizerKind::Sgd;
  ReducerKind reducer = ReducerKind::Tree;
  bool zero1 = false;  // ZeRO-1's sharded optimizer over the tree's sums
  bool swap = false;   // the last rank swaps its first two images: another order, other bits
};

// Rows [begin, begin + count) of global batch b as this rank's batch.
data::DeviceBatch share(const data::DeviceBatch& b, int64_t begin, int64_t count) {
  const int64_t per = b.images.numel() / b.images.size(0);
  data::DeviceBatch s;
  s.images = b.images.flat_slice(begin * per, count * per).view({count, 1, 28, 28}).clone();
  std::vector<int64_t> labels = b.labels.to_vector_i64();
  s.labels = Tensor::from_vector_i64({labels.begin() + begin, labels.begin() + begin + count},
                                     {count}, Device::cpu());
  s.size = count;
  return s;
}

// b with its first two images (and labels) swapped.
data::DeviceBatch swapped(const data::DeviceBatch& b) {
  const int64_t per = b.images.numel() / b.images.size(0);
  std::vector<float> px = b.images.to_vector();
  std::swap_ranges(px.begin(), px.begin() + per, px.begin() + per);
  std::vector<int64_t> labels = b.labels.to_vector_i64();
  std::swap(labels[0], labels[1]);
  data::DeviceBatch s = b;
  s.images = Tensor::from_vector(px, b.images.shape(), Device::cpu());
  s.labels = Tensor::from_vector_i64(labels, b.labels.shape(), Device::cpu());
  return s;
}

// Rank r of `world` (comm null: one process) runs the steps; returns its weights.
std::vector<float> train(const Job& run, comm::Communicator* comm, int world, int r) {
  Generator init(1234), dropout(99);  // equal on every rank: the mode draws by global position
  auto model = nn::make_model(run.model, {}, init, dropout);
  ReducerOptions ro;
  ro.kind = run.reducer;
  ro.tree_zero1 = run.zero1;
  ro.bucket_bytes = 4096;  // several buckets
  OptimizerOptions oo;
  oo.kind = run.optimizer;
  auto opt = make_optimizer(oo, model->named_parameters());
  TrainStep step(*model,
                 make_synchronisation(comm, model->named_parameters(), ro, oo, std::move(opt)),
                 NonfiniteMode::Stop, Device::cpu(), r, 0);
  const size_t chunks = chunk_tree::chunk_count(static_cast<size_t>(run.batch), kChunk);
  const chunk_tree::Range mine = chunk_tree::rank_chunks(chunks, world, r);
  const auto first = static_cast<int64_t>(mine.begin) * kChunk;
  const int64_t count = std::min(run.batch, static_cast<int64_t>(mine.end) * kChunk) - first;
  const int64_t total = run.steps * run.accumulate;
  for (int64_t i = 0; i < total; ++i) {
    MicroBatch m = micro_batch(i, total, run.accumulate);
    if (run.reducer == ReducerKind::Tree)
      m.chunks = nn::ChunkPlan{kChunk, run.batch, static_cast<int64_t>(mine.begin)};
    bool took = false;
    const data::DeviceBatch global = testing::batch(0, static_cast<int>(i), run.batch);
    data::DeviceBatch mine_batch = share(global, first, count);
    if (run.swap && r == world - 1) mine_batch = swapped(mine_batch);
    step.run(mine_batch, m, &took);
    EXPECT_TRUE(took);
  }
  EXPECT_EQ(step.steps(), run.steps);
  std::vector<float> out = testing::flat_params(*model);
  for (const auto& [name, b] : model->named_buffers())  // BatchNorm's running statistics
    if (b.dtype() == DType::F32) {
      const std::vector<float> v = b.to_vector();
      out.insert(out.end(), v.begin(), v.end());
    }
  return out;
}

std::vector<std::vector<float>> train_world(const Job& run, int world) {
  std::vector<std::vector<float>> weights(world);
  if (world == 1) {
    weights[0] = train(run, nullptr, 1, 0);
    return weights;
  }
  auto comms = comm::make_mem_communicators(world);
  testing::expect_no_errors(testing::run_threads(
      world, [&](int r) { weights[r] = train(run, comms[r].get(), world, r); }));
  return weights;
}

// The ranks as threads over a real transport (shared memory or TCP), meeting through one store.
std::vector<std::vector<float>> train_over(const Job& run, comm::TransportKind kind, int world) {
  auto store = std::make_shared<comm::MemStore>(comm::Millis(10000));
  comm::ConnectOptions o;
  o.timeout = comm::Millis(10000);
  o.transport = kind;
  std::vector<std::vector<float>> weights(world);
  testing::expect_no_errors(testing::run_threads(world, [&](int r) {
    auto c = comm::connect_communicator(store, r, world, o);
    weights[r] = train(run, c.get(), world, r);
  }));
  return weights;
}

void expect_same_bits(const Job& run) {
  const std::vector<float> one = train_world(run, 1)[0];
  for (int world = 2; world <= 4; ++world) {
    const auto w = train_world(run, world);
    for (int r = 0; r < world; ++r)
      EXPECT_TRUE(w[r] == one) << run.model << " batch " << run.batch << " W " << world << " rank "
                               << r;
  }
}

TEST(WorldInvariant, LinearSameWeightsAtEveryWorldSize) {
  expect_same_bits({});
  Job r;
  r.batch = 88;  // a short last chunk
  expect_same_bits(r);
}

TEST(WorldInvariant, NetAndSimpleCnnWithDropout) {
  Job r;
  r.model = "net";
  expect_same_bits(r);
  r.model = "simplecnn";
  r.steps = 2;
  expect_same_bits(r);
}

TEST(WorldInvariant, OverSharedMemoryAndTcp) {
  for (const char* model : {"net", "convnet"}) {
    Job r;
    r.model = model;
    r.steps = 2;
    const std::vector<float> one = train_world(r, 1)[0];
    for (comm::TransportKind kind : {comm::TransportKind::Shm, comm::TransportKind::Tcp})
      for (int world : {2, 3, 4}) {
        const auto w = train_over(r, kind, world);
        for (int rank = 0; rank < world; ++rank)
          EXPECT_TRUE(w[rank] == one) << model << " " << comm::transport_kind_name(kind) << " W "
                                      << world << " rank " << rank;
      }
  }
}

TEST(WorldInvariant, ConvNetsBatchNormOverTheGlobalBatch) {
  Job r;
  r.model = "convnet";
  r.steps = 2;
  expect_same_bits(r);
}

TEST(WorldInvariant, AdamAndAccumulation) {
  Job r;
  r.optimizer = OptimizerKind::Adam;
  r.accumulate = 2;
  r.steps = 2;
  expect_same_bits(r);
}

TEST(WorldInvariant, ZeroOneShardsTheTreesSums) {
  Job r;
  r.zero1 = true;
  r.optimizer = OptimizerKind::Adam;
  expect_same_bits(r);
}

TEST(WorldInvariant, Bf16PrecisionOnTheBatchInvariantSchedules) {
  if (!kernels::cpu::has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  nn::set_matmul_precision(nn::Precision::BF16);  // process-wide: back to fp32 below
  Job r;
  r.model = "net";  // fc1 (320 -> 50) and conv2 in bf16
  const std::vector<float> in_bf16 = train_world(r, 1)[0];
  expect_same_bits(r);
  nn::set_matmul_precision(nn::Precision::F32);
  EXPECT_NE(train_world(r, 1)[0], in_bf16) << "bf16 changed nothing";
}

TEST(WorldInvariant, TheRingReducerGivesOtherBits) {
  Job r;
  r.reducer = ReducerKind::Bucketed;
  const std::vector<float> one = train_world(r, 1)[0];
  bool differs = false;
  for (int world = 2; world <= 4; ++world) differs = differs || train_world(r, world)[0] != one;
  EXPECT_TRUE(differs);
}

// Two images of one chunk trade places (the same set, another order): the comparison sees it.
TEST(WorldInvariant, AChangedOrderIsCaught) {
  Job r;
  const std::vector<float> one = train_world(r, 1)[0];
  r.swap = true;
  for (int world = 2; world <= 4; ++world) EXPECT_NE(train_world(r, world)[0], one) << world;
}

TEST(WorldInvariant, ABatchWithoutAPlanIsRefused) {
  testing::SmallModel m;
  OptimizerOptions oo;
  ReducerOptions ro;
  ro.kind = ReducerKind::Tree;
  auto opt = make_optimizer(oo, m.model->named_parameters());
  TrainStep step(*m.model,
                 make_synchronisation(nullptr, m.model->named_parameters(), ro, oo, std::move(opt)),
                 NonfiniteMode::Stop, Device::cpu(), 0, 0);
  bool took = false;
  EXPECT_THROW(step.run(testing::batch(0, 0, 16), MicroBatch{}, &took), Error);
}

TEST(WorldInvariant, BytesOfTheTreeSchedule) {
  // One node per rank: 2(W-1)/W of the buffer, as the ring; k nodes: (k+1)(W-1)/W.
  EXPECT_EQ(tree_bytes(1000, 4, 0, 1), 2 * 750 * 4);
  EXPECT_EQ(tree_bytes(1000, 4, 0, 2), 3 * 750 * 4);
  EXPECT_EQ(tree_bytes(1000, 1, 0, 1), 0);
}

}  // namespace
}  // namespace engine::parallel
