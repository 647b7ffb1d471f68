// tests/report/test_profile.cpp: train --profile's table (report/profile) from a trace recorded
// by core/trace: layer rows with their flops, phase rows, only events inside training steps.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/trace.h"
#include "io/json.h"
#include "report/profile.h"

namespace {

using engine::report::profile_table;
namespace trace = engine::trace;

// One training step as train records it: forward, backward and optimizer inside "step".
void record_step() {
  trace::Scope step("step", "step");
  {
    trace::Scope f("forward", "forward");
    trace::Scope conv("conv1", "forward");
    conv.arg("flops", 2e6);
  }
  {
    trace::Scope b("backward", "backward");
    trace::Scope conv("conv1 ConvolutionBackward", "backward");
  }
  trace::Scope opt("optimizer", "optimizer");
}

TEST(Profile, FoldsTheStepsOfTheMainThread) {
  trace::clear();
  trace::enable(0);
  for (int i = 0; i < 2; ++i) {
    { trace::Scope d("data", "data"); }
    record_step();
  }
  { trace::Scope eval("fc_only_in_eval", "forward"); }  // outside every step: not counted
  trace::disable();
  const std::string t = profile_table(trace::to_json());
  trace::clear();
  EXPECT_NE(t.find("Profile of rank 0, 2 steps"), std::string::npos) << t;
  EXPECT_NE(t.find("  conv1 "), std::string::npos) << t;
  EXPECT_EQ(t.find("ConvolutionBackward"), std::string::npos) << "folded into conv1:\n" << t;
  EXPECT_EQ(t.find("fc_only_in_eval"), std::string::npos) << t;
  for (const char* row : {"  data ", "  forward ", "  backward ", "  optimizer ", "  step + data "})
    EXPECT_NE(t.find(row), std::string::npos) << row << " missing:\n" << t;
}

// From 10 steps on, a tenth of them (at most 5) are warm-up and left out, data included.
TEST(Profile, LeavesOutTheWarmUpSteps) {
  trace::clear();
  trace::enable(0);
  for (int i = 0; i < 25; ++i) {
    if (i < 2) {
      trace::Scope d("data", "data");
      trace::Scope w("first_touch", "forward");
    } else {
      trace::Scope d("data", "data");
    }
    record_step();
  }
  trace::disable();
  const std::string t = profile_table(trace::to_json());
  trace::clear();
  EXPECT_NE(t.find("Profile of rank 0, 23 steps after 2 warm-up steps"), std::string::npos) << t;
  EXPECT_EQ(t.find("first_touch"), std::string::npos) << t;
  EXPECT_NE(t.find("  conv1 "), std::string::npos) << t;
}

// A hand-made trace with exact times (us): one step of a model with a pooling first layer
// (conv2d_pool inside conv1), a container (layer1) and an op outside every module.
std::string exact_trace(int steps) {
  using engine::Json;
  Json events = Json::array();
  events.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 1}, {"args", {{"name", "main"}}}});
  auto x = [&](const char* name, const char* cat, double ts, double dur, Json args = nullptr) {
    Json e = {{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", 0},
              {"tid", 1},     {"ts", ts},   {"dur", dur}};
    if (!args.is_null()) e["args"] = args;
    events.push_back(e);
  };
  for (int i = 0; i < steps; ++i) {
    const double t = 2000.0 * i;
    x("data", "data", t, 100);
    x("step", "step", t + 100, 1000);
    x("forward", "forward", t + 110, 400);
    x("model", "forward", t + 111, 350);
    x("conv1", "forward", t + 112, 100, {{"flops", 2e6}, {"bwd_flops", 2e6}});
    x("conv2d_pool", "forward", t + 113, 95);
    x("layer1", "forward", t + 220, 150);
    x("layer1.0", "forward", t + 221, 80, {{"flops", 1e6}, {"bwd_flops", 2e6}});
    x("layer1.3", "forward", t + 305, 60);
    x("batch_norm2d_pool", "forward", t + 306, 58);
    x("max_pool2d_relu", "forward", t + 375, 50);
    x("nll_loss", "forward", t + 470, 20);
    x("backward", "backward", t + 520, 300);
    x("conv1 Conv2dPoolBackward", "backward", t + 530, 100);
    x("MaxPool2dReluBackward", "backward", t + 640, 50);
    x("allreduce wait", "comm", t + 830, 30);
    x("optimizer", "optimizer", t + 870, 100);
  }
  return engine::dump_json(Json{{"traceEvents", events}});
}

struct Parsed {
  std::map<std::string, std::vector<double>> layers;  // name -> fwd ms, bwd ms, share %
  std::map<std::string, std::vector<double>> phases;  // name -> ms, share %
};

// The table's layer and phase rows ("  name  numbers...", share with its '%').
Parsed parse_table(const std::string& t) {
  Parsed p;
  std::istringstream in(t);
  std::string l;
  std::map<std::string, std::vector<double>>* into = nullptr;
  while (std::getline(in, l)) {
    if (l.rfind("  layer ", 0) == 0) {
      into = &p.layers;
      continue;
    }
    if (l.rfind("  phase ", 0) == 0) {
      into = &p.phases;
      continue;
    }
    if (!into) continue;
    const size_t name_end = l.find("  ", 2);
    std::istringstream ls(l.substr(name_end));
    std::vector<double> nums;
    for (std::string w; ls >> w;) nums.push_back(w == "-" ? 0 : std::stod(w));
    std::string name = l.substr(2, name_end - 2);
    (*into)[name] = nums;
  }
  return p;
}

// Issue 27: conv1's conv2d_pool was a row of its own beside conv1, which holds it; the rows
// added up to more than the forward phase and the shares to 103%.
TEST(Profile, RowsAddUpToTheirPhasesAndSharesTo100) {
  const std::string t = profile_table(exact_trace(2));
  const Parsed p = parse_table(t);
  for (const char* inside : {"conv2d_pool", "layer1", "batch_norm2d_pool", "model"})
    EXPECT_EQ(p.layers.count(inside), 0u) << inside << " is inside another row:\n" << t;
  const std::map<std::string, std::pair<double, double>> want = {
      {"conv1", {0.100, 0.100}}, {"layer1.0", {0.080, 0}},
      {"layer1.3", {0.060, 0}},  {"max_pool2d_relu", {0.050, 0}},
      {"nll_loss", {0.020, 0}},  {"MaxPool2dReluBackward", {0, 0.050}},
      {"other", {0.090, 0.150}}};
  ASSERT_EQ(p.layers.size(), want.size()) << t;
  double fwd = 0, bwd = 0, layer_share = 0;
  for (const auto& [name, ms] : want) {
    ASSERT_EQ(p.layers.count(name), 1u) << name << "\n" << t;
    const std::vector<double>& r = p.layers.at(name);
    EXPECT_DOUBLE_EQ(r[0], ms.first) << name << "\n" << t;
    EXPECT_DOUBLE_EQ(r[1], ms.second) << name << "\n" << t;
    fwd += r[0];
    bwd += r[1];
    layer_share += r[2];
  }
  EXPECT_NEAR(fwd, p.phases.at("forward")[0], 1e-9) << t;
  EXPECT_NEAR(bwd, p.phases.at("backward")[0], 1e-9) << t;
  EXPECT_NEAR(layer_share, p.phases.at("forward")[1] + p.phases.at("backward")[1], 0.35) << t;
  double phase_ms = 0, phase_share = 0;
  for (const auto& [name, r] : p.phases) {
    if (name == "step + data") continue;
    phase_ms += r[0];
    phase_share += r[1];
  }
  EXPECT_NEAR(phase_ms, p.phases.at("step + data")[0], 1e-9) << t;
  EXPECT_DOUBLE_EQ(p.phases.at("step + data")[0], 1.1) << t;
  EXPECT_DOUBLE_EQ(p.phases.at("other")[0], 0.17) << t;
  EXPECT_NEAR(phase_share, 100.0, 0.35) << t;
  // conv1's GFLOP/s: 2e6 flops in 100 us, forward and backward.
  EXPECT_DOUBLE_EQ(p.layers.at("conv1")[3], 20.0) << t;
  EXPECT_DOUBLE_EQ(p.layers.at("conv1")[4], 20.0) << t;
}

TEST(Profile, NoStepAndBadTraces) {
  trace::clear();
  trace::enable(0);
  { trace::Scope d("data", "data"); }
  trace::disable();
  EXPECT_EQ(profile_table(trace::to_json()), "profile: no training step was recorded\n");
  trace::clear();
  try {
    profile_table("{\"traceEvents\": [");
    ADD_FAILURE() << "no error for a truncated trace";
  } catch (const engine::Error& e) {
    EXPECT_NE(std::string(e.what()).find("trace"), std::string::npos) << e.what();
  }
}

}  // namespace
