// tests/parallel/test_step_graph.cpp: the policy of the captured training step
// (parallel/step_graph.h) behind a recording fake of the device's graph: warm-up, one capture,
// replays, the eager short batch, dropout's offsets, each setting that turns auto off, and the
// data on the device's choice.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/dropout.h"
#include "parallel/step_graph.h"

namespace engine::parallel {
namespace {

// Records every call; the device counter is host memory here.
struct FakeGraph : GraphBackend {
  std::vector<std::string>* log;
  uint64_t counter = 0;
  bool fail_end = false;
  explicit FakeGraph(std::vector<std::string>* l) : log(l) {}
  void begin() override { log->push_back("begin"); }
  void end() override {
    log->push_back("end");
    if (fail_end) ENGINE_FAIL("capture invalidated");
  }
  void abort() noexcept override { log->push_back("abort"); }
  void replay() override { log->push_back("replay@" + std::to_string(counter)); }
  const uint64_t* dropout_base() override { return &counter; }
  void set_dropout_base(uint64_t o) override { counter = o; }
};

// A step that reserves dropout counters (as a model's dropout layers do) and logs what ran.
struct Steps {
  std::vector<std::string> log;
  Generator gen{7};
  int host_steps = 0;  // the trainer's step counter
  StepParts parts() {
    StepParts p;
    p.eager = [this] {
      log.push_back("eager@" + std::to_string(gen.reserve(40)));
      ++host_steps;
      return Tensor::full({}, 1.f, Device::cpu());
    };
    p.load_inputs = [this] { log.push_back("load"); };
    p.on_inputs = [this] {
      // Dropout launches now read their offset on the device, relative to the capture's first.
      const kernels::DropoutOffsetSource& src = kernels::dropout_offset_source();
      if (src.base) log.push_back("device offsets from " + std::to_string(src.host_base));
      log.push_back("record@" + std::to_string(gen.reserve(40)));
      ++host_steps;
      return Tensor::full({}, 2.f, Device::cpu());
    };
    p.after_replay = [this] { ++host_steps; };
    return p;
  }
};

TEST(StepGraph, WarmsUpCapturesOnceThenReplays) {
  Steps s;
  auto fake = std::make_unique<FakeGraph>(&s.log);
  StepGraph g(std::move(fake), 128, 3, &s.gen);
  for (int i = 0; i < 6; ++i) g.run(128, s.parts());
  // Offsets: 10 counters a step (40 draws); the capture records at 30, its launch reads 30.
  const std::vector<std::string> want = {
      "eager@0",   "eager@10", "eager@20",  "load", "begin",     "device offsets from 30",
      "record@30", "end",      "replay@30", "load", "replay@40", "load",
      "replay@50"};
  EXPECT_EQ(s.log, want);
  EXPECT_EQ(kernels::dropout_offset_source().base, nullptr);  // eager again after the capture
  EXPECT_TRUE(g.captured());
  EXPECT_EQ(g.replays(), 2);
  EXPECT_EQ(g.last(), StepRun::Replayed);
  EXPECT_EQ(s.host_steps, 6);
  EXPECT_EQ(s.gen.offset(), 60u);  // as six eager steps leave it
}

TEST(StepGraph, ShortBatchRunsEagerlyAndDoesNotCountAsWarmUp) {
  Steps s;
  StepGraph g(std::make_unique<FakeGraph>(&s.log), 128, 1, &s.gen);
  EXPECT_EQ(g.run(96, s.parts()).item(), 1.f);
  EXPECT_EQ(g.last(), StepRun::Eager);
  g.run(128, s.parts());  // the one warm-up step
  EXPECT_FALSE(g.captured());
  EXPECT_EQ(g.run(128, s.parts()).item(), 2.f);
  EXPECT_EQ(g.last(), StepRun::Captured);
  g.run(96, s.parts());  // the epoch's short last batch, after the capture
  EXPECT_EQ(g.last(), StepRun::Eager);
  g.run(128, s.parts());
  EXPECT_EQ(g.last(), StepRun::Replayed);
  const std::vector<std::string> want = {
      "eager@0",   "eager@10", "load", "begin",    "device offsets from 20", "record@20", "end",
      "replay@20", "eager@30", "load", "replay@40"};
  EXPECT_EQ(s.log, want);
}

TEST(StepGraph, AFailedCaptureIsAbortedAndThrows) {
  Steps s;
  auto fake = std::make_unique<FakeGraph>(&s.log);
  fake->fail_end = true;
  StepGraph g(std::move(fake), 8, 1, nullptr);
  g.run(8, s.parts());
  EXPECT_THROW(g.run(8, s.parts()), Error);
  EXPECT_EQ(s.log.back(), "abort");
  EXPECT_FALSE(g.captured());
  EXPECT_THROW(StepGraph(std::make_unique<FakeGraph>(&s.log), 8, 0, nullptr), Error);
}

StepSettings capturable() {
  StepSettings s;
  s.cuda = true;
  return s;
}

TEST(StepGraphChoice, AutoIsOnWhereEveryOpCanBeCaptured) {
  StepSettings s = capturable();
  EXPECT_EQ(step_graph_blocker(s).blocker, GraphBlocker::None);
  EXPECT_TRUE(choose_step_graph(AutoOnOff::Auto, s).on);
  s.world = 2;
  s.collectives = "nccl";
  EXPECT_TRUE(choose_step_graph(AutoOnOff::On, s).on);
  // NCCL inside a captured step has not run on a GPU: auto stays eager and says why.
  const GraphChoice a = choose_step_graph(AutoOnOff::Auto, s);
  EXPECT_FALSE(a.on);
  EXPECT_FALSE(a.refused);
  EXPECT_EQ(a.blocker, GraphBlocker::Untried);
  EXPECT_EQ(a.reason(),
            "world 2 over nccl: a captured step with collectives has not run on a GPU yet");
  const GraphChoice off = choose_step_graph(AutoOnOff::Off, s);
  EXPECT_FALSE(off.on);
  EXPECT_FALSE(off.refused);
  EXPECT_EQ(off.blocker, GraphBlocker::Off);
}

TEST(StepGraphChoice, EachSettingTurnsAutoOffAndIsRefusedByOn) {
  struct Case {
    void (*change)(StepSettings&);
    GraphBlocker blocker;
    std::string reason_has;
  };
  using B = GraphBlocker;
  const std::vector<Case> cases = {
      {[](StepSettings& s) { s.cuda = false; }, B::Cpu, "the device is the CPU"},
      {[](StepSettings& s) { s.data_parallel = true; }, B::DataParallel, "several devices"},
      {[](StepSettings& s) { s.world = 2, s.collectives = "ring over shm"; }, B::HostCollectives,
       "the collectives go through the host (ring over shm)"},
      {[](StepSettings& s) { s.world = 2, s.collectives = "mpi"; }, B::HostCollectives,
       "through the host (mpi)"},
      {[](StepSettings& s) { s.accumulate = 4; }, B::Accumulate, "accumulation over 4 batches"},
      {[](StepSettings& s) { s.nonfinite = NonfiniteMode::Skip; }, B::NonfiniteSkip,
       "the host decides each step"},
      {[](StepSettings& s) { s.sync_bn = true; }, B::SyncBn, "through the host"},
      {[](StepSettings& s) { s.reducer = ReducerKind::PowerSgd; }, B::Compression, "powersgd"},
      {[](StepSettings& s) { s.reducer = ReducerKind::Bf16; }, B::Compression, "bf16"},
      {[](StepSettings& s) { s.reducer = ReducerKind::Zero1; }, B::Zero, "ZeRO-1"},
      {[](StepSettings& s) { s.optimizer = OptimizerKind::Adam; }, B::Optimizer, "Adam"},
      {[](StepSettings& s) { s.trace = true; }, B::Trace, "per-op host timing"},
      {[](StepSettings& s) { s.profile = true; }, B::Profile, "per-op host timing"},
  };
  for (const Case& c : cases) {
    StepSettings s = capturable();
    c.change(s);
    const GraphChoice a = choose_step_graph(AutoOnOff::Auto, s);
    EXPECT_FALSE(a.on) << c.reason_has;
    EXPECT_FALSE(a.refused) << c.reason_has;
    EXPECT_EQ(a.blocker, c.blocker) << c.reason_has;
    EXPECT_NE(a.reason().find(c.reason_has), std::string::npos) << a.reason();
    EXPECT_EQ(a.reason().find("--"), std::string::npos) << "a flag name: " << a.reason();
    const GraphChoice on = choose_step_graph(AutoOnOff::On, s);
    EXPECT_TRUE(on.refused) << c.reason_has;
    EXPECT_EQ(on.reason(), a.reason());
  }
  // Nothing else blocks a step that averages with any of the plain reducers.
  for (ReducerKind k : {ReducerKind::AllReduce, ReducerKind::ReduceBroadcast}) {
    StepSettings s = capturable();
    s.reducer = k;
    EXPECT_TRUE(choose_step_graph(AutoOnOff::Auto, s).on);
  }
}

TEST(DeviceDataChoice, TheCpuAndOneProcessOverSeveralDevicesKeepTheDataOnTheHost) {
  data::MnistSplit train;
  train.count = 4;
  train.rows = train.cols = 28;
  train.images.assign(4 * 28 * 28, 0);
  train.labels.assign(4, 1);
  DeviceData d = make_device_data(AutoOnOff::Auto, train, Device::cpu(), false);
  EXPECT_EQ(d.data, nullptr);
  EXPECT_FALSE(d.choice.refused);
  EXPECT_EQ(d.choice.reason, "the device is the CPU");
  EXPECT_EQ(d.nbytes, data::device_split_nbytes(train));
  d = make_device_data(AutoOnOff::On, train, Device::cpu(), true);
  EXPECT_EQ(d.data, nullptr);
  EXPECT_TRUE(d.choice.refused);
  EXPECT_EQ(d.choice.reason, "the batch is cut on the host");
  EXPECT_FALSE(make_device_data(AutoOnOff::Off, train, Device::cpu(), true).choice.refused);
}

}  // namespace
}  // namespace engine::parallel
