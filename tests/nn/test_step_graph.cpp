// tests/nn/test_step_graph.cpp: the policy of the captured training step (nn/step_graph.h) behind
// a recording fake of the device's graph: warm-up, one capture, replays, the eager short batch,
// dropout's offsets, and each reason --cuda-graph auto turns itself off.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/dropout.h"
#include "nn/step_graph.h"

namespace engine::nn {
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
  s.nonfinite = "stop";
  return s;
}

TEST(StepGraphChoice, AutoIsOnWhereEveryOpCanBeCaptured) {
  StepSettings s = capturable();
  EXPECT_EQ(step_graph_blocker(s), "");
  EXPECT_TRUE(choose_step_graph("auto", s).on);
  s.world = 2;
  s.collectives = "nccl";
  EXPECT_TRUE(choose_step_graph("on", s).on);
  // NCCL inside a captured step has not run on a GPU: auto stays eager and says why.
  const GraphChoice a = choose_step_graph("auto", s);
  EXPECT_FALSE(a.on);
  EXPECT_FALSE(a.refused);
  EXPECT_NE(a.reason.find("world 2 over nccl"), std::string::npos) << a.reason;
  EXPECT_FALSE(choose_step_graph("off", s).on);
  EXPECT_EQ(choose_step_graph("off", s).reason, "--cuda-graph off");
}

TEST(StepGraphChoice, EachReasonTurnsAutoOffAndIsRefusedByOn) {
  struct Case {
    void (*change)(StepSettings&);
    std::string reason_has;
  };
  const std::vector<Case> cases = {
      {[](StepSettings& s) { s.cuda = false; }, "the device is the CPU"},
      {[](StepSettings& s) { s.data_parallel = true; }, "--mode dp"},
      {[](StepSettings& s) { s.world = 2, s.collectives = "ring over shm"; }, "ring over shm"},
      {[](StepSettings& s) { s.world = 2, s.collectives = "mpi"; }, "through the host (mpi)"},
      {[](StepSettings& s) { s.accumulate = 4; }, "--accumulate 4"},
      {[](StepSettings& s) { s.nonfinite = "skip"; }, "--nonfinite skip"},
      {[](StepSettings& s) { s.sync_bn = true; }, "--sync-bn"},
      {[](StepSettings& s) { s.grad_compression = "powersgd:4"; }, "--grad-compression powersgd"},
      {[](StepSettings& s) { s.grad_compression = "bf16"; }, "--grad-compression bf16"},
      {[](StepSettings& s) { s.zero = 1; }, "--zero 1"},
      {[](StepSettings& s) { s.optimizer = "adam"; }, "--optimizer adam"},
      {[](StepSettings& s) { s.trace = true; }, "--trace"},
      {[](StepSettings& s) { s.profile = true; }, "--profile"},
  };
  for (const Case& c : cases) {
    StepSettings s = capturable();
    c.change(s);
    const GraphChoice a = choose_step_graph("auto", s);
    EXPECT_FALSE(a.on) << c.reason_has;
    EXPECT_FALSE(a.refused) << c.reason_has;
    EXPECT_NE(a.reason.find(c.reason_has), std::string::npos) << a.reason;
    const GraphChoice on = choose_step_graph("on", s);
    EXPECT_TRUE(on.refused) << c.reason_has;
    EXPECT_EQ(on.reason, a.reason);
  }
  EXPECT_THROW(choose_step_graph("sometimes", capturable()), Error);
}

}  // namespace
}  // namespace engine::nn
