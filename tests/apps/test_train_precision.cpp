// tests/apps/test_train_precision.cpp: train --precision: bf16 trains and says so (a line, the
// metrics' "precision"), is as bit-exact on resume as fp32, moves checkpoints between precisions,
// and fails at once, naming the missing CPU feature, where AVX512_BF16 is off.
#include <fstream>

#include "io/json.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

class TrainPrecision : public TrainTest {
 protected:
  void SetUp() override {
    if (!kernels::cpu::has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
    TrainTest::SetUp();
  }
  std::string train(const std::string& args) const {
    return kTrain + " --threads 2 --data-dir " + data_ + " " + args;
  }
};

TEST_F(TrainPrecision, Bf16TrainsAndSaysSo) {
  RunResult r =
      run(train("--model simplecnn --epochs 1 --batch-size 64 --precision bf16 "
                "--metrics " +
                path("m.jsonl")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Precision bf16: conv2d and linear"), std::string::npos) << r.output;
  std::ifstream in(path("m.jsonl"));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  Json m = parse_json(line, "m.jsonl");
  EXPECT_EQ(m.at("precision").get<std::string>(), "bf16");
  EXPECT_GT(m.at("test_acc").get<double>(), 0.5);
}

TEST_F(TrainPrecision, Bf16ResumesBitForBit) {
  expect_resume_bit_for_bit(train("--model simplecnn --epochs 2 --batch-size 64 --precision bf16"),
                            dir_);
}

TEST_F(TrainPrecision, CheckpointsMoveBetweenPrecisions) {
  RunResult a =
      run(train("--model net --steps 3 --checkpoint-every 3 --precision bf16 --checkpoint " +
                path("ck.safetensors")));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run(train("--model net --steps 6 --precision fp32 --resume " +
                          path("ck.safetensors") + " --save " + path("b.safetensors")));
  ASSERT_EQ(b.code, 0) << b.output;
  RunResult c =
      run(train("--model net --eval-only --precision bf16 --init-from " + path("b.safetensors")));
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("Test set: average loss"), std::string::npos) << c.output;
}

TEST_F(TrainTest, PrecisionErrors) {
  RunResult bad = run(kTrain + " --precision fp16 --data-dir " + data_);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--precision: 'fp16' is not one of fp32|bf16"), std::string::npos)
      << bad.output;
  RunResult off = run("ENGINE_MAX_CPU_ISA=avx512_core " + kTrain +
                      " --device cpu --precision bf16 --data-dir " + data_);
  EXPECT_EQ(off.code, 1) << off.output;
  // The reason names the cap where the CPU has the instructions, the CPU where it has not.
  const std::string why = kernels::cpu::has_avx512_bf16()
                              ? "ENGINE_MAX_CPU_ISA=avx512_core turns it off"
                              : "this CPU does not have it";
  EXPECT_NE(
      off.output.find("train: --precision bf16 needs a CPU with AVX512_BF16 (vdpbf16ps): " + why),
      std::string::npos)
      << off.output;
  EXPECT_EQ(off.output.find("Rank 0"), std::string::npos) << off.output;  // nothing trained
  RunResult isa = run("ENGINE_MAX_CPU_ISA=sse " + kTrain + " --device cpu --precision bf16");
  EXPECT_EQ(isa.code, 1) << isa.output;
  EXPECT_NE(isa.output.find("ENGINE_MAX_CPU_ISA=sse: expected avx512_core_bf16|avx512_core|avx2"),
            std::string::npos)
      << isa.output;
}

}  // namespace
