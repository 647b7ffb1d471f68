// tests/parallel/test_train_step.cpp: the training step (parallel/train_step.h) driven in-process:
// one rank against the plain optimizer, every reducer over 2 and 3 ranks as threads (equal
// weights on every rank after each step), averaging against one process on the whole batch, and
// skip skipping on every rank alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "parallel/train_step.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

using testing::batch;
using testing::flat_params;
using testing::SmallModel;

std::unique_ptr<TrainStep> make_step(nn::Model& m, comm::Communicator* comm, ReducerKind kind,
                                     NonfiniteMode mode = NonfiniteMode::Stop) {
  ReducerOptions r;
  r.kind = kind;
  r.bucket_bytes = 4096;  // several buckets for the linear model's 31 KiB
  r.powersgd_start = 0;
  r.seed = 5;
  OptimizerOptions o;
  auto opt = make_optimizer(o, m.named_parameters());
  return std::make_unique<TrainStep>(
      m, make_synchronisation(comm, m.named_parameters(), r, o, std::move(opt)), mode,
      Device::cpu(), comm ? comm->rank() : 0, 0);
}

TEST(TrainStep, OneRankStepsAsThePlainOptimizer) {
  SmallModel a, b;
  auto step = make_step(*a.model, nullptr, ReducerKind::Bucketed);
  auto opt = make_optimizer({}, b.model->named_parameters());
  for (int s = 0; s < 3; ++s) {
    const data::DeviceBatch x = batch(0, s, 16);
    bool took = false;
    const float loss = step->run(x, MicroBatch{}, &took).item();
    opt->zero_grad();
    Tensor l = b.model->loss((*b.model)(x.images), x.labels);
    l.backward();
    opt->step();
    EXPECT_TRUE(took);
    EXPECT_EQ(loss, l.item());
  }
  EXPECT_EQ(flat_params(*a.model), flat_params(*b.model));
  EXPECT_EQ(step->steps(), 3);
  EXPECT_EQ(step->last_step_bytes(), 0);
  EXPECT_EQ(step->reducer().name(), "none");
  EXPECT_GT(step->flop_per_image(), 0);
}

class EveryReducer : public ::testing::TestWithParam<ReducerKind> {};

TEST_P(EveryReducer, LeavesEqualWeightsOnEveryRank) {
  for (int world : {2, 3}) {
    auto comms = comm::make_mem_communicators(world);
    std::vector<std::vector<float>> weights(world);
    std::vector<std::string> names(world);
    std::vector<int64_t> bytes(world);
    testing::expect_no_errors(testing::run_threads(world, [&](int r) {
      SmallModel m;
      auto step = make_step(*m.model, comms[r].get(), GetParam());
      for (int s = 0; s < 2; ++s) {
        bool took = false;
        step->run(batch(r, s, 8), MicroBatch{}, &took);
        ASSERT_TRUE(took);
      }
      weights[r] = flat_params(*m.model);
      names[r] = step->reducer().name();
      bytes[r] = step->last_step_bytes();
      EXPECT_EQ(step->steps(), 2);
    }));
    for (int r = 1; r < world; ++r) EXPECT_EQ(weights[r], weights[0]) << "rank " << r;
    SmallModel fresh;
    EXPECT_NE(weights[0], flat_params(*fresh.model)) << "the step changed nothing";
    EXPECT_GT(bytes[0], 0);
    EXPECT_EQ(names[0].substr(0, 3), reducer_kind_name(GetParam()).substr(0, 3));
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, EveryReducer,
                         ::testing::Values(ReducerKind::AllReduce, ReducerKind::ReduceBroadcast,
                                           ReducerKind::Bucketed, ReducerKind::Bf16,
                                           ReducerKind::Fp16, ReducerKind::PowerSgd,
                                           ReducerKind::Zero1),
                         [](const auto& info) {
                           std::string n = reducer_kind_name(info.param);
                           n.erase(std::remove(n.begin(), n.end(), '-'), n.end());
                           return n;
                         });

TEST(TrainStep, AveragingOverRanksEqualsOneProcessOnTheWholeBatch) {
  constexpr int kWorld = 2;
  auto comms = comm::make_mem_communicators(kWorld);
  std::vector<std::vector<float>> weights(kWorld);
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    SmallModel m;
    auto step = make_step(*m.model, comms[r].get(), ReducerKind::Bucketed);
    bool took = false;
    step->run(batch(r, 0, 8), MicroBatch{}, &took);
    weights[r] = flat_params(*m.model);
  }));
  SmallModel one;
  auto step = make_step(*one.model, nullptr, ReducerKind::Bucketed);
  const data::DeviceBatch a = batch(0, 0, 8), b = batch(1, 0, 8);
  std::vector<float> px = a.images.to_vector(), px1 = b.images.to_vector();
  px.insert(px.end(), px1.begin(), px1.end());
  std::vector<int64_t> labels = a.labels.to_vector_i64(), labels1 = b.labels.to_vector_i64();
  labels.insert(labels.end(), labels1.begin(), labels1.end());
  data::DeviceBatch whole;
  whole.images = Tensor::from_vector(px, {16, 1, 28, 28}, Device::cpu());
  whole.labels = Tensor::from_vector_i64(labels, {16}, Device::cpu());
  whole.size = 16;
  bool took = false;
  step->run(whole, MicroBatch{}, &took);
  const std::vector<float> want = flat_params(*one.model);
  ASSERT_EQ(weights[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(weights[0][i], want[i], 1e-6f) << i;
}

void expect_skips_everywhere(ReducerKind kind) {
  constexpr int kWorld = 2;
  auto comms = comm::make_mem_communicators(kWorld);
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    SmallModel m;
    const std::vector<float> before = flat_params(*m.model);
    auto step = make_step(*m.model, comms[r].get(), kind, NonfiniteMode::Skip);
    data::DeviceBatch x = batch(r, 0, 8);
    if (r == 1) {  // one rank's bad image: its loss, then every averaged gradient, is NaN
      std::vector<float> px = x.images.to_vector();
      px[3] = std::numeric_limits<float>::quiet_NaN();
      x.images = Tensor::from_vector(px, x.images.shape(), Device::cpu());
    }
    bool took = true;
    step->run(x, MicroBatch{}, &took);
    EXPECT_FALSE(took) << "rank " << r;
    EXPECT_EQ(step->guard().skipped(), 1);
    EXPECT_EQ(step->steps(), 0);
    EXPECT_EQ(flat_params(*m.model), before) << "rank " << r;
    step->run(batch(r, 1, 8), MicroBatch{}, &took);  // a good step goes on, on every rank
    EXPECT_TRUE(took);
    EXPECT_EQ(step->steps(), 1);
  }));
}

TEST(TrainStep, SkipSkipsOnEveryRankAlike) {
  expect_skips_everywhere(ReducerKind::Bucketed);
}

TEST(TrainStep, SkipUnderZeroOneSkipsOnEveryRankAlike) {
  expect_skips_everywhere(ReducerKind::Zero1);
}

// A device graph that records nothing: a replay changes no weights, so what the test sees is the
// step's host bookkeeping around the replays.
struct NoGraph : GraphBackend {
  uint64_t counter = 0;
  int replays = 0;
  void begin() override {}
  void end() override {}
  void abort() noexcept override {}
  void replay() override { ++replays; }
  const uint64_t* dropout_base() override { return &counter; }
  void set_dropout_base(uint64_t o) override { counter = o; }
};

TEST(TrainStep, ACapturedStepCountsEveryReplayAsAStep) {
  SmallModel m;
  auto step = make_step(*m.model, nullptr, ReducerKind::Bucketed);
  auto backend = std::make_unique<NoGraph>();
  NoGraph* graph = backend.get();
  step->capture(
      std::make_unique<TrainStepGraph>(std::move(backend), Device::cpu(), 8, 28, 28, nullptr));
  std::vector<StepRun> runs;
  for (int s = 0; s < kGraphWarmupSteps + 3; ++s) {
    bool took = false;
    step->run(batch(0, s, 8), MicroBatch{}, &took);
    EXPECT_TRUE(took);
    runs.push_back(step->last_run());
  }
  bool took = false;
  step->run(batch(0, 9, 5), MicroBatch{}, &took);  // a short batch: eager
  runs.push_back(step->last_run());
  using R = StepRun;
  EXPECT_EQ(runs, (std::vector<R>{R::Eager, R::Eager, R::Eager, R::Captured, R::Replayed,
                                  R::Replayed, R::Eager}));
  EXPECT_EQ(graph->replays, 3);  // the capture's own launch and two replays
  EXPECT_EQ(step->steps(), kGraphWarmupSteps + 4);
  EXPECT_EQ(step->optimizer().steps(), kGraphWarmupSteps + 4);
}

}  // namespace
}  // namespace engine::parallel
