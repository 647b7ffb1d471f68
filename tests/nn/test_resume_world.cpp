// tests/nn/test_resume_world.cpp: a training checkpoint records its run's world size, batch size
// and mode (engine.world_size, engine.batch_size, engine.world_invariant), and
// check_resume_position refuses another world size or batch size where the position would be
// read wrong (mid-epoch, or a rank's own state that another world size cannot take over), naming
// both values; at an epoch's end, in files of older versions and for a run that only evaluates,
// it lets the run go on.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>

#include "core/rng.h"
#include "io/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/checkpoint_check.h"
#include "nn/models.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

using namespace engine;

namespace {

using S = nn::ResumeMismatch::Setting;

// Written by 4 ranks at a global batch of 128, 3 steps into epoch 1.
nn::TrainPosition written() {
  nn::TrainPosition p;
  p.epoch = 1;
  p.batch_in_epoch = 3;
  p.world_size = 4;
  p.batch_size = 128;
  return p;
}

// Resumed by `world` ranks at a global batch of `batch`, for 2 epochs of 100 steps.
nn::ResumeRun resuming(int64_t world, int64_t batch) {
  nn::ResumeRun r;
  r.epochs = 2;
  r.batches_per_epoch = 100;
  r.world_size = world;
  r.batch_size = batch;
  return r;
}

// check_resume_position(p, run): the ResumeMismatch it throws ("" and Optimizer when none).
struct Refusal {
  S setting = S::Optimizer;
  std::string what, worded;
};
Refusal refusal(const nn::TrainPosition& p, const nn::ResumeRun& run) {
  try {
    nn::check_resume_position("ck", p, run);
  } catch (const nn::ResumeMismatch& e) {
    return {e.setting, e.what(), e.worded("THE-FLAG")};
  }
  return {};
}

}  // namespace

TEST(ResumeWorld, TheRunsWorldBatchAndModeTravelAndOlderFilesSayNothing) {
  Generator init{1}, dropout{2};
  std::unique_ptr<nn::Model> m = nn::make_model("linear", {}, init, dropout);
  nn::SGD opt{m->named_parameters(), kernels::SgdConfig{}};
  engine::testing::TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  nn::save_training_checkpoint(path, *m, opt, written());
  StFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata.at("engine.world_size"), "4");
  EXPECT_EQ(f.metadata.at("engine.batch_size"), "128");
  EXPECT_EQ(f.metadata.at("engine.world_invariant"), "0");
  nn::TrainPosition back = nn::load_training_checkpoint(path, *m, opt);
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.batch_size, 128);
  EXPECT_FALSE(back.world_invariant);
  f.metadata["engine.world_invariant"] = "1";
  save_safetensors(path, f.entries, f.metadata);
  EXPECT_TRUE(nn::load_training_checkpoint(path, *m, opt).world_invariant);
  for (const char* k : {"engine.world_size", "engine.batch_size", "engine.world_invariant"})
    f.metadata.erase(k);
  save_safetensors(path, f.entries, f.metadata);
  back = nn::load_training_checkpoint(path, *m, opt);
  EXPECT_EQ(back.world_size, 0);
  EXPECT_EQ(back.batch_size, 0);
  EXPECT_FALSE(back.world_invariant);
  // Malformed values name the file and the key.
  for (const auto& [key, value, says] :
       {std::tuple{"engine.world_size", "0", "is 0 (a run has a rank"},
        std::tuple{"engine.batch_size", "-2", "is '-2', not an integer"},
        std::tuple{"engine.world_invariant", "2", "is '2', not an integer 0 .. 1"}}) {
    StFile bad = f;
    bad.metadata[key] = value;
    save_safetensors(path, bad.entries, bad.metadata);
    engine::testing::expect_error([&] { nn::load_training_checkpoint(path, *m, opt); },
                                  {path + ": metadata '" + key + "' " + says});
  }
}

TEST(ResumeWorld, AnotherWorldSizeMidEpochIsRefusedNamingBoth) {
  for (int64_t w : {1, 2, 8}) {
    const Refusal r = refusal(written(), resuming(w, 128));
    EXPECT_EQ(r.setting, S::WorldSize) << r.what;
    const std::string n = std::to_string(w);
    EXPECT_EQ(r.what.rfind("ck: field 'engine.world_size' is 4, this run's world size is " + n +
                               ": the checkpoint stops mid-epoch (engine.batch_in_epoch 3",
                           0),
              0u)
        << r.what;
    EXPECT_NE(r.what.find("(resume it at 4 ranks, or from a checkpoint at an epoch's end)"),
              std::string::npos)
        << r.what;
    EXPECT_NE(r.worded.find("this run's THE-FLAG is " + n + ":"), std::string::npos) << r.worded;
  }
  EXPECT_EQ(refusal(written(), resuming(4, 128)).what, "");  // the same world goes on
}

TEST(ResumeWorld, AtAnEpochsEndAnotherWorldSizeGoesOnUnlessARanksStateHoldsSomething) {
  nn::TrainPosition p = written();
  p.batch_in_epoch = 0;
  EXPECT_EQ(refusal(p, resuming(2, 128)).what, "");
  // PowerSGD's shared Q and error feedback of zeros (before compression starts) go anywhere.
  p.comm_state = {{"fc.weight.powersgd_q", Tensor::from_vector({1, 2}, {2, 1})},
                  {"fc.weight.powersgd_error.rank0", Tensor::from_vector({0, 0}, {1, 2})},
                  {"fc.weight.powersgd_error.rank1", Tensor::from_vector({0, -0.0f}, {1, 2})}};
  EXPECT_EQ(refusal(p, resuming(2, 128)).what, "");
  p.comm_state.emplace_back("fc.weight.powersgd_error.rank3", Tensor::from_vector({0, 1}, {1, 2}));
  const Refusal r = refusal(p, resuming(2, 128));
  EXPECT_EQ(r.setting, S::WorldSize);
  EXPECT_EQ(r.what,
            "ck: field 'engine.world_size' is 4, this run's world size is 2 and the file holds one "
            "rank's state 'comm.fc.weight.powersgd_error.rank3', which another world size cannot "
            "share out (resume it at 4 ranks)");
  EXPECT_EQ(refusal(p, resuming(4, 128)).what, "");  // each rank takes its own back
  EXPECT_EQ(refusal(p, resuming(4, 64)).what, "");   // a batch size leaves it alone
}

TEST(ResumeWorld, AnotherBatchSizeMidEpochIsRefusedAndGoesOnAtAnEpochsEnd) {
  const Refusal r = refusal(written(), resuming(4, 64));
  EXPECT_EQ(r.setting, S::BatchSize);
  EXPECT_EQ(r.what,
            "ck: field 'engine.batch_size' is 128, this run's batch size is 64: the checkpoint "
            "stops mid-epoch (engine.batch_in_epoch 3 counts steps of 128 images), where another "
            "batch size cannot go on (resume it with 128, or from a checkpoint at an epoch's end)");
  EXPECT_NE(r.worded.find("this run's THE-FLAG is 64:"), std::string::npos) << r.worded;
  nn::TrainPosition p = written();
  p.batch_in_epoch = 0;
  EXPECT_EQ(refusal(p, resuming(4, 64)).what, "");
  EXPECT_EQ(refusal(p, resuming(3, 96)).what, "");
}

TEST(ResumeWorld, OlderFilesAndARunThatOnlyEvaluatesGoOnAsBefore) {
  nn::TrainPosition old = written();
  old.world_size = old.batch_size = 0;  // a file of an older version says neither
  EXPECT_EQ(refusal(old, resuming(2, 64)).what, "");
  EXPECT_EQ(refusal(written(), resuming(0, 0)).what, "");  // --eval-only: any world size
  // The position is still checked against the epoch (here past its 100 steps).
  nn::TrainPosition late = written();
  late.batch_in_epoch = 100;
  engine::testing::expect_error([&] { nn::check_resume_position("ck", late, resuming(4, 128)); },
                                {"ck: field 'engine.batch_in_epoch' is 100, past the end"});
}

TEST(ResumeWorld, AnotherModeMidEpochIsRefused) {
  nn::TrainPosition p = written();
  p.world_invariant = true;
  engine::testing::expect_error(
      [&] { nn::check_resume_position("ck", p, resuming(4, 128)); },
      {"ck: field 'engine.world_invariant' is 1 and this run is not in the world-invariant mode: "
       "mid-epoch (engine.batch_in_epoch 3)"});
  nn::ResumeRun run = resuming(4, 128);
  run.world_invariant = true;
  engine::testing::expect_error([&] { nn::check_resume_position("ck", written(), run); },
                                {"field 'engine.world_invariant' is 0 and this run is in the"});
  p.batch_in_epoch = 0;
  EXPECT_EQ(refusal(p, resuming(4, 128)).what, "");
}

TEST(ResumeWorld, TheWorldInvariantModeGoesOnMidEpochAtAnotherWorldSize) {
  nn::TrainPosition p = written();  // mid-epoch (batch 3)
  p.world_invariant = true;
  for (int w : {1, 2, 8}) {
    nn::ResumeRun run = resuming(w, p.batch_size);
    run.world_invariant = true;
    EXPECT_EQ(refusal(p, run).what, "") << w;
  }
  nn::ResumeRun other = resuming(2, p.batch_size / 2);  // its batches are others
  other.world_invariant = true;
  EXPECT_NE(refusal(p, other).what, "");
}
