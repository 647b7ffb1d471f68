// tests/apps/test_train_zero.cpp: `train --zero 1` (ZeRO-1): two ranks with sharded optimizer
// state end where two ranks without it end (SGD with momentum, Adam); its checkpoint is the
// unsharded one, resumable with or without --zero; each rank keeps half the state.
#include <sstream>

#include "io/atomic_file.h"
#include "io/json.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

class ZeroTest : public TrainTest {
 protected:
  // Two ranks of simplecnn; a 40 KB bucket cap cuts its 87 KB of parameters into several buckets.
  RunResult two(const std::string& extra) {
    return run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- " +
               kTrain +
               " --model simplecnn --sharding sampler --batch-size 64 --epochs 3 --threads 1 "
               "--bucket-mb 0.04 --timeout 60 --data-dir " +
               data_ + " " + extra);
  }
};

class ZeroLikeUnsharded : public ZeroTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ZeroLikeUnsharded, TwoRanksEndWithinOneMillionth) {
  // "adam+accumulate": ZeRO steps only on a group's last batch, as the gradient sync would.
  const std::string name = GetParam();
  const std::string opt = name == "adam+accumulate" ? " --optimizer adam --accumulate 2 --steps 5"
                                                    : " --optimizer " + name + " --steps 10";
  RunResult a = two(opt + " --save " + path("a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult z = two(opt + " --zero 1 --save " + path("z.safetensors"));
  ASSERT_EQ(z.code, 0) << z.output;
  EXPECT_LT(max_abs_diff(path("a.safetensors"), path("z.safetensors")), 1e-6);
  // The runs trained: the weights moved from the initial ones.
  RunResult init = two(opt + " --steps 1 --lr 1e-9 --save " + path("i.safetensors"));
  ASSERT_EQ(init.code, 0) << init.output;
  EXPECT_GT(max_abs_diff(path("a.safetensors"), path("i.safetensors")), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Train, ZeroLikeUnsharded,
                         ::testing::Values("sgd", "adam", "adam+accumulate"), [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '+') c = '_';
                           return s;
                         });

TEST_F(ZeroTest, CheckpointIsTheUnshardedOneAndResumesEitherWay) {
  const std::string opt = " --optimizer adam --checkpoint ";
  RunResult a = two(opt + path("a.ckpt") + " --steps 5");
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult z = two(opt + path("z.ckpt") + " --steps 5 --zero 1");
  ASSERT_EQ(z.code, 0) << z.output;
  // Weights and every optimizer state tensor, by the unsharded names.
  EXPECT_LT(max_abs_diff(path("a.ckpt"), path("z.ckpt")), 1e-6);
  StFile fa = load_safetensors(path("a.ckpt")), fz = load_safetensors(path("z.ckpt"));
  EXPECT_EQ(fa.entries.size(), fz.entries.size());
  RunResult end = two(" --optimizer adam --steps 11 --save " + path("end.safetensors"));
  ASSERT_EQ(end.code, 0) << end.output;
  for (const std::string how : {"", " --zero 1"}) {
    RunResult r = two(" --optimizer adam --steps 11 --resume " + path("z.ckpt") + how + " --save " +
                      path("r.safetensors"));
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("Resumed"), std::string::npos) << r.output;
    EXPECT_LT(max_abs_diff(path("end.safetensors"), path("r.safetensors")), 1e-6) << how;
  }
}

TEST_F(ZeroTest, EachRankKeepsHalfTheOptimizerState) {
  auto state_bytes = [&](const std::string& extra) -> int64_t {
    const std::string m = path("m" + std::to_string(extra.size()) + ".jsonl");
    RunResult r = two(" --optimizer adam --steps 2 --metrics " + m + extra);
    EXPECT_EQ(r.code, 0) << r.output;
    std::istringstream lines(read_file(m));
    std::string line;
    std::getline(lines, line);
    return parse_json(line, m).at("optimizer_state_bytes").get<int64_t>();
  };
  const int64_t full = state_bytes(""), half = state_bytes(" --zero 1");
  EXPECT_GT(full, 0);
  // Half, up to the padding of each bucket to a multiple of the world size (4 bytes per state).
  EXPECT_NEAR(static_cast<double>(half), full / 2.0, 64.0);
}

TEST_F(ZeroTest, ZeroWithModeDpIsAUsageError) {
  RunResult r = run(kTrain + " --zero 1 --mode dp --dp-devices cpu,cpu --data-dir " + data_);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--zero 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--mode dp"), std::string::npos) << r.output;
}

}  // namespace
