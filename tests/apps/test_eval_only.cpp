// tests/apps/test_eval_only.cpp: `train --eval-only`: the test line of given weights with no
// training (PyTorch-made weights give PyTorch's accuracy, nothing is touched), the ranks of a job
// split the test set and print one total, and what it refuses.
#include <cstdlib>
#include <regex>

#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

bool torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
}

std::string script_path() {
  return (fs::path(__FILE__).parent_path() / "torch_eval_weights.py").string();
}

struct TestLine {
  bool found = false;
  double loss = 0;
  std::string accuracy;  // "C/N (P%)"
};

// The last "Test set: average loss L, accuracy C/N (P%)" line of a run's output.
TestLine last_test_line(const std::string& out) {
  static const std::regex re(
      R"(Test set: average loss ([0-9.]+), accuracy ([0-9]+/[0-9]+ \([0-9.]+%\)))");
  TestLine t;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    t.found = true;
    t.loss = std::stod((*it)[1].str());
    t.accuracy = (*it)[2].str();
  }
  return t;
}

class EvalOnly : public TrainTest {
 protected:
  std::string launch2() const {
    return kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- ";
  }
  // The one-rank and the two-rank test lines of `args` agree, and only rank 0 prints.
  void expect_two_ranks_print_the_same_total(const std::string& args, const TestLine& one) {
    RunResult two = run(launch2() + kTrain + args + " --timeout 60");
    ASSERT_EQ(two.code, 0) << two.output;
    const TestLine t = last_test_line(two.output);
    ASSERT_TRUE(t.found) << two.output;
    EXPECT_EQ(t.accuracy, one.accuracy) << two.output;
    EXPECT_NEAR(t.loss, one.loss, 1.5e-4) << two.output;
    EXPECT_NE(two.output.find("[rank 0] Test set"), std::string::npos) << two.output;
    EXPECT_EQ(two.output.find("[rank 1] Test set"), std::string::npos) << two.output;
    EXPECT_NE(two.output.find("2 rank(s)"), std::string::npos) << two.output;
  }
};

}  // namespace

TEST_F(EvalOnly, WithoutWeightsIsAUsageError) {
  RunResult r = run(kTrain + " --eval-only --data-dir " + data_);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--eval-only evaluates given weights: add --init-from FILE or --resume"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  // --resume auto with no checkpoint yet: nothing to evaluate.
  r = run(kTrain + " --eval-only --resume auto --checkpoint " + path("none.safetensors") +
          " --data-dir " + data_);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("no checkpoint at " + path("none.safetensors")), std::string::npos)
      << r.output;
}

// PyTorch trains a ConvNet (BatchNorm) a little and reports its eval-mode accuracy on the test
// split; --eval-only on those weights prints the same, on one rank and on two, and --save after it
// writes the very tensors it was given (no parameter or buffer touched: BatchNorm in eval mode).
TEST_F(EvalOnly, PrintsTheAccuracyPyTorchComputesForItsWeights) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch and numpy";
  const std::string weights = path("torch.safetensors");
  RunResult py = run("/usr/bin/python3 '" + script_path() + "' " + data_ + " " + weights);
  ASSERT_EQ(py.code, 0) << py.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(py.output, m, std::regex(R"(correct ([0-9]+/[0-9]+) loss ([0-9.]+))")))
      << py.output;
  const std::string args = " --model convnet --eval-only --init-from " + weights + " --data-dir " +
                           data_ + " --save " + path("after.safetensors");
  RunResult one = run(kTrain + args);
  ASSERT_EQ(one.code, 0) << one.output;
  const TestLine t = last_test_line(one.output);
  ASSERT_TRUE(t.found) << one.output;
  EXPECT_EQ(t.accuracy.substr(0, t.accuracy.find(' ')), m[1].str()) << one.output << py.output;
  EXPECT_NEAR(t.loss, std::stod(m[2].str()), 1.5e-4) << one.output << py.output;
  EXPECT_EQ(one.output.find("epoch"), std::string::npos) << "no training: " << one.output;
  expect_same_bits(weights, path("after.safetensors"));
  expect_two_ranks_print_the_same_total(args, t);
  expect_same_bits(weights, path("after.safetensors"));
}

// A training checkpoint evaluates to the test line its epoch printed; two ranks print the same.
TEST_F(EvalOnly, ResumesACheckpointAndPrintsItsEpochTestLine) {
  const std::string ck = path("ck.safetensors");
  RunResult trained = run(kTrain + " --model linear --epochs 1 --batch-size 32 --data-dir " +
                          data_ + " --checkpoint " + ck);
  ASSERT_EQ(trained.code, 0) << trained.output;
  const TestLine want = last_test_line(trained.output);
  ASSERT_TRUE(want.found) << trained.output;
  const std::string args = " --model linear --eval-only --resume " + ck + " --data-dir " + data_;
  RunResult one = run(kTrain + args);
  ASSERT_EQ(one.code, 0) << one.output;
  const TestLine t = last_test_line(one.output);
  EXPECT_EQ(t.accuracy, want.accuracy) << one.output;
  EXPECT_EQ(t.loss, want.loss) << one.output;
  EXPECT_EQ(one.output.find("Resumed"), std::string::npos) << one.output;
  expect_two_ranks_print_the_same_total(args, t);
  // --resume auto finds the checkpoint named by --checkpoint.
  RunResult autod = run(kTrain + " --model linear --eval-only --resume auto --checkpoint " + ck +
                        " --data-dir " + data_);
  ASSERT_EQ(autod.code, 0) << autod.output;
  EXPECT_EQ(last_test_line(autod.output).accuracy, want.accuracy) << autod.output;
}
