// tests/nn/test_checkpoint_loss_sums.cpp: a mid-epoch training checkpoint carries every rank's
// loss sum so far, bit for bit (engine.epoch_loss_sums), and checkpoints without that key (older
// versions, or written at an epoch's start) still load.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "io/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/models.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

using namespace engine;

namespace {

struct Fixture {
  Generator init{1}, dropout{2};
  std::unique_ptr<nn::Model> m = nn::make_model("linear", {}, init, dropout);
  nn::SGD opt{m->named_parameters(), kernels::SgdConfig{}};
  engine::testing::TempDir dir;
  std::string path = dir.file("ck.safetensors");
};

}  // namespace

TEST(CheckpointLossSums, TravelBitForBit) {
  Fixture f;
  nn::TrainPosition pos;
  pos.batch_in_epoch = 3;
  pos.epoch_loss_sums = {
      1.0 / 3.0, 2.302585092994046, 0.0, -0.0, std::numeric_limits<double>::denorm_min(), 1e300};
  nn::save_training_checkpoint(f.path, *f.m, f.opt, pos);
  EXPECT_EQ(load_safetensors(f.path)
                .metadata.at("engine.epoch_loss_sums")
                .rfind("0x1.5555555555555p-2,0x1.26bb1bbb55516p+1,0x0p+0,-0x0p+0,", 0),
            0u);
  const nn::TrainPosition back = nn::load_training_checkpoint(f.path, *f.m, f.opt);
  ASSERT_EQ(back.epoch_loss_sums.size(), pos.epoch_loss_sums.size());
  for (size_t i = 0; i < pos.epoch_loss_sums.size(); ++i) {
    EXPECT_EQ(back.epoch_loss_sums[i], pos.epoch_loss_sums[i]) << i;
    EXPECT_EQ(std::signbit(back.epoch_loss_sums[i]), std::signbit(pos.epoch_loss_sums[i])) << i;
  }
}

TEST(CheckpointLossSums, AbsentKeyLoadsAsNone) {
  Fixture f;
  nn::TrainPosition pos;  // at an epoch's start: nothing to carry
  nn::save_training_checkpoint(f.path, *f.m, f.opt, pos);
  EXPECT_EQ(load_safetensors(f.path).metadata.count("engine.epoch_loss_sums"), 0u);
  EXPECT_TRUE(nn::load_training_checkpoint(f.path, *f.m, f.opt).epoch_loss_sums.empty());
}

TEST(CheckpointLossSums, AGarbledValueNamesFileAndKey) {
  Fixture f;
  nn::TrainPosition pos;
  pos.epoch_loss_sums = {1.5};
  nn::save_training_checkpoint(f.path, *f.m, f.opt, pos);
  StFile file = load_safetensors(f.path);
  file.metadata["engine.epoch_loss_sums"] = "0x1.8p+0,oops";
  save_safetensors(f.path, file.entries, file.metadata);
  engine::testing::expect_error(
      [&] { nn::load_training_checkpoint(f.path, *f.m, f.opt); },
      {f.path + ": metadata 'engine.epoch_loss_sums' holds 'oops', not a number"});
}
