// tests/apps/test_strict_resume.cpp: `train --resume` checks every field of a training checkpoint
// against the run that resumes it, and refuses what it cannot honour with one line naming the
// file and the field, exit 1: another optimizer, a state tensor of the wrong shape, counters out
// of range, a batch past the end of the epoch, a malformed DataParallel offset, another model,
// another batch size or world size mid-epoch.
// The checkpoints are real ones (a short run of `train`), edited through io/safetensors.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tests/apps/train_fixture.h"

namespace engine::testing {
namespace {

class StrictResume : public TrainTest {
 protected:
  // --model linear on the fixture's 512 images, batch 32: 16 batches per epoch.
  std::string common(const std::string& extra = "") const {
    return kTrain + " --device cpu --model linear --batch-size 32 --epochs 1 --data-dir " + data_ +
           " " + extra;
  }
  // A checkpoint after 3 steps of a run with `flags`.
  std::string checkpoint(const std::string& flags) {
    const std::string ck = path("ck_" + std::to_string(++made_) + ".safetensors");
    const RunResult r = run(common(flags) + " --steps 3 --checkpoint " + ck);
    EXPECT_EQ(r.code, 0) << r.output;
    return ck;
  }
  // A copy of `ck` changed by `edit`.
  std::string edited(const std::string& ck, const std::function<void(StFile&)>& edit) {
    StFile f = load_safetensors(ck);
    edit(f);
    const std::string out = path("bad_" + std::to_string(++made_) + ".safetensors");
    save_safetensors(out, f.entries, f.metadata);
    return out;
  }
  // Resumes `ck` with `flags`: exit 1, one line naming the file and holding every part.
  void expect_refused(const std::string& ck, const std::string& flags,
                      const std::vector<std::string>& parts) {
    const RunResult r = run(common(flags) + " --steps 6 --resume " + ck);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "not one line:\n" << r.output;
    EXPECT_NE(r.output.find("train: " + ck + ": "), std::string::npos) << r.output;
    for (const std::string& p : parts)
      EXPECT_NE(r.output.find(p), std::string::npos) << "'" << r.output << "' lacks '" << p << "'";
    std::printf("[message] %s", r.output.c_str());
  }
  int made_ = 0;
};

TEST_F(StrictResume, AnUntouchedCheckpointResumes) {
  const std::string ck = checkpoint("--optimizer adam");
  const RunResult r = run(common("--optimizer adam --steps 6 --resume " + ck));
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST_F(StrictResume, AdamCheckpointWithSgd) {
  const std::string ck = checkpoint("--optimizer adam");
  expect_refused(ck, "--optimizer sgd",
                 {"optimizer state 'optimizer.", ".exp_avg' is adam's",
                  "an adam checkpoint cannot resume with --optimizer sgd"});
  expect_refused(ck, "--optimizer sgd --momentum 0", {"cannot resume with --optimizer sgd"});
}

TEST_F(StrictResume, SgdCheckpointWithAdam) {
  expect_refused(checkpoint("--optimizer sgd"), "--optimizer adam",
                 {"optimizer state 'optimizer.", ".momentum_buffer' is sgd's",
                  "an sgd checkpoint cannot resume with --optimizer adam"});
  // Without momentum SGD keeps no state: Adam would start from zero moments at step 3.
  expect_refused(checkpoint("--optimizer sgd --momentum 0"), "--optimizer adam",
                 {"optimizer state 'optimizer.", "is missing after 3 optimizer steps"});
  // With momentum on, where the checkpoint had none, it would start from zero buffers.
  expect_refused(checkpoint("--optimizer sgd --momentum 0"), "",
                 {".momentum_buffer' is missing after 3 optimizer steps"});
}

TEST_F(StrictResume, TransposedMomentumBufferWithTheRightElementCount) {
  const std::string ck = edited(checkpoint(""), [](StFile& f) {
    for (StEntry& e : f.entries)
      if (e.name == "optimizer.weight.momentum_buffer") e.shape = {784, 10};
  });
  expect_refused(ck, "",
                 {"optimizer state 'optimizer.weight.momentum_buffer' has shape (784, 10), its "
                  "parameter has (10, 784)"});
}

TEST_F(StrictResume, CountersOutOfRange) {
  const std::string ck = checkpoint("");
  auto with = [&](const std::string& key, const std::string& value) {
    return edited(ck, [&](StFile& f) { f.metadata[key] = value; });
  };
  expect_refused(with("engine.step", "18446744073709551615"), "",
                 {"metadata 'engine.step' is '18446744073709551615', not an integer 0 .. "
                  "9223372036854775807"});
  expect_refused(with("engine.epoch", "-1"), "", {"metadata 'engine.epoch' is '-1'"});
  expect_refused(with("engine.batch_in_epoch", "16"), "",
                 {"field 'engine.batch_in_epoch' is 16, past the end of an epoch of this run (16 "
                  "batches per rank)"});
  expect_refused(with("engine.epoch", "5"), "", {"field 'engine.epoch' is 5, past the 1 epoch"});
  expect_refused(with("engine.step", "7"), "",
                 {"field 'engine.step' is 7 but 'engine.optimizer_steps' is 3"});
}

TEST_F(StrictResume, DataParallelDropoutOffsetNotANumber) {
  const std::string ck = checkpoint("--mode dp --dp-devices cpu,cpu");
  ASSERT_EQ(load_safetensors(ck).metadata.count("dp_dropout_offset_1"), 1u);
  const std::string bad = edited(ck, [](StFile& f) { f.metadata["dp_dropout_offset_1"] = "abc"; });
  expect_refused(bad, "--mode dp --dp-devices cpu,cpu",
                 {"metadata 'dp_dropout_offset_1' is 'abc', not an integer"});
  const std::string gap = edited(ck, [](StFile& f) { f.metadata["dp_dropout_offset_3"] = "0"; });
  expect_refused(gap, "--mode dp --dp-devices cpu,cpu",
                 {"metadata 'dp_dropout_offset_3'", "numbered 1 .. N"});
  expect_refused(ck, "", {"fields 'dp_dropout_offset_<i>' hold 1 DataParallel replica(s)"});
}

TEST_F(StrictResume, AnotherModelOrSeed) {
  const std::string ck = checkpoint("");
  const RunResult r =
      run(kTrain + " --device cpu --model net --batch-size 32 --epochs 1 --data-dir " + data_ +
          " --steps 6 --resume " + ck);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(ck + ": field 'model' is 'linear'"), std::string::npos) << r.output;
  std::printf("[message] %s", r.output.c_str());
  expect_refused(ck, "--seed 7", {"field 'engine.init_seed' is 1234, this run's --seed is 7"});
}

// Mid-epoch another --batch-size or world size would read engine.batch_in_epoch in the wrong
// steps: refused, naming both values. At an epoch's end both go on, and --eval-only takes any.
TEST_F(StrictResume, AnotherBatchSizeOrWorldSizeMidEpoch) {
  const std::string ck = checkpoint("");
  const std::string at16 = kTrain + " --device cpu --model linear --batch-size 16 --data-dir " +
                           data_ + " --epochs 2 --resume ";
  RunResult r = run(at16 + ck);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(r.output, "train: " + ck +
                          ": field 'engine.batch_size' is 32, this run's --batch-size is 16: the "
                          "checkpoint stops mid-epoch (engine.batch_in_epoch 3 counts steps of 32 "
                          "images), where another batch size cannot go on (resume it with 32, or "
                          "from a checkpoint at an epoch's end)\n");
  // Written by 2 ranks (the file edited, so that this test runs one process), resumed by one.
  expect_refused(edited(ck, [](StFile& f) { f.metadata["engine.world_size"] = "2"; }), "",
                 {"field 'engine.world_size' is 2, this run's world size (--world-size or the "
                  "launcher's ranks) is 1: the checkpoint stops mid-epoch"});
  r = run(at16 + ck + " --eval-only");
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string end = path("end.safetensors");
  ASSERT_EQ(run(common("--checkpoint " + end)).code, 0);
  const std::string end2 = edited(end, [](StFile& f) { f.metadata["engine.world_size"] = "2"; });
  r = run(at16 + end2);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Resumed from " + end2 + " at epoch 1, batch 0, step 16"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace engine::testing
