// tests/apps/test_bench_knobs.cpp: the benchmarks keep their sweep flags, and where one is not
// given the ENGINE_* variable it stands for decides (docs/knobs.md): --help shows it as the
// default, and a bad value stops the program naming the variable.
#include <gtest/gtest.h>

#include <string>

#include "tests/apps/train_fixture.h"

namespace engine::testing {
namespace {

const std::string kAllreduceBench = kBuild + "/apps/allreduce_bench";
const std::string kBenchKernels = kBuild + "/apps/bench_kernels";

// The "--name ... [default: v]" line of a program's --help, or "".
std::string help_line(const std::string& env, const std::string& program, const std::string& flag) {
  const RunResult r = run(env + " " + program + " --help");
  EXPECT_EQ(r.code, 0) << r.output;
  const size_t at = r.output.find("\n  --" + flag + " ");
  if (at == std::string::npos) return "";
  return r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
}

bool has_default(const std::string& line, const std::string& value) {
  return line.find("[default: " + value + "]") != std::string::npos;
}

TEST(BenchKnobs, AllreduceBenchFollowsTheVariablesWhereItsFlagsAreNotGiven) {
  EXPECT_TRUE(has_default(help_line("ENGINE_ALGO=", kAllreduceBench, "algo"), "auto"));
  EXPECT_TRUE(has_default(help_line("ENGINE_ALGO=rd", kAllreduceBench, "algo"), "rd"));
  EXPECT_TRUE(has_default(
      help_line("ENGINE_RING_PROTOCOL=events", kAllreduceBench, "cuda-ring-protocol"), "events"));
  EXPECT_TRUE(
      has_default(help_line("ENGINE_RING_CHANNELS=4", kAllreduceBench, "cuda-ring-channels"), "4"));
  const RunResult bad = run("ENGINE_ALGO=bcube " + kAllreduceBench + " --world-size 2");
  EXPECT_NE(bad.code, 0) << bad.output;
  EXPECT_NE(bad.output.find("ENGINE_ALGO=bcube: expected auto|ring|rd|rh|tree"), std::string::npos)
      << bad.output;
}

TEST(BenchKnobs, BenchKernelsRunsBothUnlessTheVariableNamesOne) {
  EXPECT_TRUE(
      has_default(help_line("ENGINE_CUDA_KERNELS=", kBenchKernels, "cuda-kernels"), "both"));
  EXPECT_TRUE(has_default(help_line("ENGINE_CUDA_KERNELS=library", kBenchKernels, "cuda-kernels"),
                          "library"));
}

}  // namespace
}  // namespace engine::testing
