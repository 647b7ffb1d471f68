// tests/apps/test_train_nonfinite.cpp: train --nonfinite: weights holding NaN are refused at
// --init-from and --resume naming the tensor; a learning rate that overflows stops every rank
// naming the step and the parameter, and no checkpoint holds a non-finite number; skip skips and
// counts, under --zero 1 too; off trains on as before.
#include <cmath>
#include <cstring>
#include <limits>

#include "io/json.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

class Nonfinite : public TrainTest {
 protected:
  std::string train(const std::string& args) const {
    return kTrain + " --model simplecnn --data-dir " + data_ + " --threads 1 " + args;
  }
  // `from` with one element of `tensor` (every tensor whose name ends so) set to NaN, into `to`.
  static void poison(const std::string& from, const std::string& to, const std::string& tensor) {
    StFile f = load_safetensors(from);
    for (StEntry& e : f.entries)
      if (e.name.ends_with(tensor) && e.dtype == DType::F32) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(e.bytes.data() + 4 * (e.numel() / 2), &nan, 4);
      }
    save_safetensors(to, f.entries, f.metadata);
  }
  // Every float32 tensor of a safetensors file holds finite numbers only.
  static bool all_finite(const std::string& path) {
    StFile f = load_safetensors(path);
    for (const StEntry& e : f.entries)
      if (e.dtype == DType::F32)
        for (float v : st_values<float>(e))
          if (!std::isfinite(v)) return false;
    return true;
  }
  void expect_stops(const std::string& extra);
  void expect_skips(const std::string& extra);
};

TEST_F(Nonfinite, InitFromWithANanWeightIsRefusedNamingTheTensor) {
  RunResult ok = run(train("--steps 1 --save " + path("w.safetensors")));
  ASSERT_EQ(ok.code, 0) << ok.output;
  poison(path("w.safetensors"), path("nan.safetensors"), "fc1.weight");
  RunResult r = run(train("--steps 2 --init-from " + path("nan.safetensors")));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--init-from " + path("nan.safetensors") +
                          ": tensor 'fc1.weight' holds inf or NaN"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Rank 0, epoch"), std::string::npos) << r.output;
  RunResult off = run(train("--steps 2 --nonfinite off --init-from " + path("nan.safetensors")));
  EXPECT_EQ(off.code, 0) << "off checks nothing\n" << off.output;
}

TEST_F(Nonfinite, ResumeFromACheckpointWithNanIsRefused) {
  RunResult ok = run(train("--steps 2 --checkpoint " + path("c.safetensors")));
  ASSERT_EQ(ok.code, 0) << ok.output;
  poison(path("c.safetensors"), path("nan.safetensors"), "momentum_buffer");
  RunResult r = run(train("--steps 4 --resume " + path("nan.safetensors")));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("(optimizer state): tensor 'conv1.weight.momentum_buffer' holds inf or "
                          "NaN"),
            std::string::npos)
      << r.output;
}

// extra: "" (gradients synchronised by --sync bucketed) or "--zero 1 " (each rank scans its shards
// of the averaged gradients and the ranks agree through one all_reduce).
void Nonfinite::expect_stops(const std::string& extra) {
  const std::string ckpt = path("c.safetensors");
  RunResult r =
      run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- " +
          train(extra + "--lr 1e30 --epochs 3 --timeout 30 --checkpoint-every 1 " +
                "--checkpoint " + ckpt));
  EXPECT_NE(r.code, 0) << r.output;
  // Both ranks stop at the same step; the first to exit makes launch stop the other (as torchrun
  // does), which may be before that one has written its line (seen under ThreadSanitizer).
  int named = 0;
  for (const char* rank : {"[rank 0] train: step ", "[rank 1] train: step "}) {
    const size_t at = r.output.find(rank);
    if (at != std::string::npos && r.output.find(": the gradient of ", at) != std::string::npos)
      ++named;
  }
  EXPECT_GE(named, 1) << r.output;
  if (named < 2) {
    EXPECT_NE(r.output.find("stopping the other ranks"), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find("stopped by --nonfinite stop"), std::string::npos) << r.output;
  if (!extra.empty()) {  // the shard the ranks agreed on, with its parameters
    EXPECT_NE(r.output.find("ZeRO-1's bucket of "), std::string::npos) << r.output;
  }
  if (fs::exists(ckpt)) {
    EXPECT_TRUE(all_finite(ckpt)) << "a checkpoint holds inf or NaN";
  }
}

TEST_F(Nonfinite, AnOverflowingLearningRateStopsEveryRankAndNoCheckpointHoldsIt) {
  expect_stops("");
}

TEST_F(Nonfinite, UnderZeroOneEveryRankStopsToo) {
  expect_stops("--zero 1 ");
}

void Nonfinite::expect_skips(const std::string& extra) {
  const std::string metrics = path("m.jsonl");
  RunResult r =
      run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) + " -- " +
          train(extra + "--lr 1e30 --epochs 1 --timeout 30 --nonfinite skip --metrics " + metrics +
                " --save " + path("w.safetensors")));
  // The first step takes the weights near the float range without a non-finite gradient; from
  // then on every gradient is NaN and every step is skipped, on both ranks alike (else their
  // gradient buckets would no longer pair up), so the saved weights stay finite.
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 0] Rank 0, epoch 0: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" (3 steps skipped: non-finite gradients)"), std::string::npos)
      << r.output;
  Json m = parse_json(read_text(metrics), metrics);
  EXPECT_EQ(m.at("skipped_steps").get<int64_t>(), 3) << m.dump();
  EXPECT_EQ(m.at("step").get<int64_t>(), 1) << "skipped steps are not optimizer steps";
  EXPECT_TRUE(all_finite(path("w.safetensors")));
}

TEST_F(Nonfinite, SkipSkipsOnEveryRankAndCounts) {
  expect_skips("");
}

TEST_F(Nonfinite, UnderZeroOneSkipSkipsOnEveryRankToo) {
  expect_skips("--zero 1 ");
}

// stop reads its queued scans where the losses are read (here only at the epoch's end, 8 steps
// later): it still names the first step that went non-finite, and nothing is saved.
TEST_F(Nonfinite, StopReadAtTheEpochsEndNamesTheFirstBadStep) {
  RunResult r = run(train("--lr 1e30 --epochs 1 --save " + path("w.safetensors")));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("train: step 2: the gradient of "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped by --nonfinite stop"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Rank 0, epoch 0: "), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("w.safetensors")));
}

TEST_F(Nonfinite, OffTrainsOnAsBefore) {
  RunResult r = run(train("--lr 1e30 --epochs 1 --nonfinite off"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Rank 0, epoch 0: "), std::string::npos) << r.output;
}

}  // namespace
