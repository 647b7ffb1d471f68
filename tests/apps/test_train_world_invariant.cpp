// tests/apps/test_train_world_invariant.cpp: `train --world-invariant` end to end: the same weights
// (byte for byte) and the same epoch and test lines at 1, 2, 3 ranks (shm) and 4 (TCP), across an
// epoch's end and with dropout, and with convnet's BatchNorm; a checkpoint written mid-epoch at 3
// ranks resumed at 2 ends on one process's bytes; what the mode does not cover is refused with
// one line.
#include <sstream>
#include <string>
#include <vector>

#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

// 512 images in batches of 96: 5 batches an epoch (the last 32 images dropped), 6 chunks each.
const std::string kArgs =
    " --world-invariant --model simplecnn --batch-size 96 --epochs 2 --steps 8 --device cpu "
    "--threads 1 --timeout 60";

// Rank 0's epoch and test lines (launcher prefixes dropped, progress lines left out).
std::vector<std::string> figures(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    for (const char* head : {"Rank 0, epoch", "Test set:"}) {
      const size_t at = l.find(head);
      if (at != std::string::npos && l.find(", batch ") == std::string::npos)
        lines.push_back(l.substr(at));
    }
  return lines;
}

class WorldInvariant : public TrainTest {
 protected:
  RunResult train(int world, const std::string& extra) {
    const std::string cmd = kTrain + kArgs + " --data-dir " + data_ + extra;
    if (world == 1) return run(cmd);
    return run(kLaunchBin + " --nproc-per-node " + std::to_string(world) + " --master-port " +
               std::to_string(port()) + " -- " + cmd);
  }
};

TEST_F(WorldInvariant, SameBytesAndLinesAtOneToFourRanks) {
  RunResult one = train(1, " --save " + path("w1.st"));
  ASSERT_EQ(one.code, 0) << one.output;
  const std::vector<std::string> want = figures(one.output);
  ASSERT_EQ(want.size(), 4u) << one.output;  // two epochs, each its epoch and test line
  for (int w : {2, 3, 4}) {
    const std::string save = path("w" + std::to_string(w) + ".st");
    RunResult r = train(w, " --save " + save + (w == 4 ? " --transport tcp" : ""));
    ASSERT_EQ(r.code, 0) << r.output;
    expect_same_bits(path("w1.st"), save);
    EXPECT_EQ(figures(r.output), want) << "W " << w;
  }
}

TEST_F(WorldInvariant, ConvNetsBatchNormGivesTheSameBytesAtThreeRanks) {
  const std::string conv = " --model convnet --steps 4";
  RunResult one = train(1, conv + " --save " + path("c1.st"));
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult three = train(3, conv + " --save " + path("c3.st"));
  ASSERT_EQ(three.code, 0) << three.output;
  expect_same_bits(path("c1.st"), path("c3.st"));  // running_mean and running_var included
  EXPECT_EQ(figures(three.output), figures(one.output));
}

TEST_F(WorldInvariant, AMidEpochCheckpointAtThreeRanksResumesAtTwo) {
  RunResult one = train(1, " --save " + path("one.st"));
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult a = train(3, " --steps 3 --checkpoint " + path("c.st"));  // batch 3 of 5
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = train(2, " --resume " + path("c.st") + " --save " + path("two.st"));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("Resumed from"), std::string::npos) << b.output;
  expect_same_bits(path("one.st"), path("two.st"));
  EXPECT_EQ(figures(b.output), figures(one.output));
}

TEST_F(WorldInvariant, WhatItDoesNotCoverIsRefused) {
  for (const std::string& bad :
       {std::string(" --sharding partition"), std::string(" --grad-compression bf16"),
        std::string(" --sync allreduce"), std::string(" --mode dp --dp-devices cpu,cpu")}) {
    RunResult r = train(1, bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--world-invariant"), std::string::npos) << r.output;
  }
  RunResult r = train(2, " --batch-size 16");  // one chunk for two ranks
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("a batch of 16 images is 1 chunks of 16, fewer than the 2 ranks"),
            std::string::npos)
      << r.output;
}

}  // namespace
