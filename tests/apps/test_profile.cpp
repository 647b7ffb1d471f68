// tests/apps/test_profile.cpp: train --profile's table (apps/train/profile) from a trace recorded
// by core/trace: layer rows with their flops, phase rows, only events inside training steps.
#include <gtest/gtest.h>

#include <string>

#include "apps/train/profile.h"
#include "core/error.h"
#include "core/trace.h"

namespace {

using engine::apps::profile_table;
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
