// tests/apps/test_train_compression.cpp: `train --grad-compression powersgd:R` on two ranks: a
// resumed run continues bit for bit (its Q and error feedback are in the checkpoint), fewer bytes
// travel, rank 0 names what is on, and bad values are usage errors naming the flag.
#include <cstdlib>
#include <sstream>

#include "io/atomic_file.h"
#include "io/json.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

class CompressionTest : public TrainTest {
 protected:
  std::string two(const std::string& args) {
    return kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- " +
           kTrain + " --model simplecnn --batch-size 64 --epochs 3 --threads 1 --timeout 60 " +
           "--data-dir " + data_ + args;
  }
  double comm_bytes(const std::string& args, std::string* out) {
    const std::string m = path("m.jsonl");
    RunResult r = run(two(args + " --steps 4 --metrics " + m));
    EXPECT_EQ(r.code, 0) << r.output;
    *out = r.output;
    std::istringstream lines(read_file(m));
    std::string line;
    std::getline(lines, line);
    return parse_json(line, m).at("comm_bytes_per_step").get<double>();
  }
};

}  // namespace

TEST_F(CompressionTest, PowerSgdResumesBitForBit) {
  // Compressed from step 2: the checkpoint at step 5 holds Q and both ranks' error feedback.
  ::setenv("ENGINE_POWERSGD_START", "2", 1);  // the ranks inherit it
  expect_resume_bit_for_bit(two(" --grad-compression powersgd:2"), dir_);
  ::unsetenv("ENGINE_POWERSGD_START");
}

TEST_F(CompressionTest, PowerSgdSendsFewerBytesAndRankZeroSaysSo) {
  std::string out_none, out_psgd;
  const double none = comm_bytes("", &out_none);
  ::setenv("ENGINE_POWERSGD_START", "0", 1);
  const double psgd = comm_bytes(" --grad-compression powersgd:1", &out_psgd);
  ::unsetenv("ENGINE_POWERSGD_START");
  EXPECT_GT(psgd, 0);
  EXPECT_LT(psgd * 4, none) << "simplecnn's conv and linear weights at rank 1";
  EXPECT_NE(out_psgd.find("[rank 0] Options: compression powersgd:1 (from step 0)"),
            std::string::npos)
      << out_psgd;
  EXPECT_EQ(out_none.find("Options:"), std::string::npos) << out_none;
}

TEST_F(CompressionTest, Bf16AndFp16EndNearFloat32WithHalfTheBytes) {
  std::string out;
  const std::string args = " --sharding sampler --shuffle off --dropout 0 --save ";
  const double none = comm_bytes(args + path("none.safetensors"), &out);
  for (const std::string type : {"bf16", "fp16"}) {
    const double half =
        comm_bytes(args + path(type + ".safetensors") + " --grad-compression " + type, &out);
    EXPECT_EQ(half * 2, none) << type;
    EXPECT_NE(out.find("[rank 0] Options: compression " + type + "\n"), std::string::npos) << out;
    // Rounded gradients: near the float32 run after 4 steps, and not the same.
    const double d = max_rel_diff(path("none.safetensors"), path(type + ".safetensors"));
    EXPECT_LT(d, 0.05) << type;
    EXPECT_GT(d, 0) << type;
  }
}

TEST_F(CompressionTest, BadValuesAreUsageErrorsNamingTheFlag) {
  for (const std::string bad : {"powersgd:0", "powersgd:", "powersgd:x", "gzip"}) {
    RunResult r = run(kTrain + " --grad-compression " + bad + " --data-dir " + data_);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--grad-compression"), std::string::npos) << r.output;
  }
  RunResult z = run(kTrain + " --grad-compression powersgd:2 --zero 1 --data-dir " + data_);
  EXPECT_EQ(z.code, 2) << z.output;
  EXPECT_NE(z.output.find("choose one"), std::string::npos) << z.output;
}
