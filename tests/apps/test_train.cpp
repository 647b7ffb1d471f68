// tests/apps/test_train.cpp: the `train` program end to end on a small generated dataset:
// flags, errors, a falling loss, metrics, checkpoints and resume, and data parallelism.
#include <fstream>

#include "core/device.h"
#include "nn/json.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

TEST_F(TrainTest, HelpListsTheFlags) {
  RunResult r = run(kTrain + " --help");
  EXPECT_EQ(r.code, 0);
  for (const char* f :
       {"--model",       "--data-dir",   "--epochs",     "--steps",   "--batch-size", "--lr",
        "--momentum",    "--optimizer",  "--seed",       "--threads", "--shuffle",    "--dropout",
        "--init-from",   "--save",       "--checkpoint", "--resume",  "--metrics",    "--backend",
        "--init-method", "--world-size", "--rank",       "--sync",    "--sharding",   "--bucket-mb",
        "--transport",   "--timeout"})
    EXPECT_NE(r.output.find(f), std::string::npos) << f;
}

TEST_F(TrainTest, BadInputGivesAClearError) {
  RunResult r = run(kTrain + " --model resnet");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("resnet"), std::string::npos) << r.output;
  r = run(kTrain + " --epochs two");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--epochs"), std::string::npos) << r.output;
  r = run(kTrain + " --data-dir " + path("nowhere"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("nowhere"), std::string::npos) << r.output;
  r = run(kTrain + " --data-dir " + data_ + " --batch-size 100 --world-size 1 --init-from " +
          path("missing.safetensors"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("missing.safetensors"), std::string::npos) << r.output;
}

TEST_F(TrainTest, LossFallsAndMetricsAreWritten) {
  RunResult r = run(kTrain + " --model linear --threads 1 --epochs 3 --lr 0.05 --data-dir " +
                    data_ + " --metrics " + path("m.jsonl"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Rank 0, epoch 0: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("accuracy"), std::string::npos) << r.output;
  std::ifstream in(path("m.jsonl"));
  std::string line;
  std::vector<Json> rows;
  while (std::getline(in, line)) rows.push_back(Json::parse(line));
  ASSERT_EQ(rows.size(), 3u);
  for (const char* k :
       {"epoch", "step", "train_loss", "test_loss", "test_acc", "images_per_s", "wall_s"})
    EXPECT_TRUE(rows[0].find(k)) << k;
  EXPECT_EQ(rows[2].at("step").as_int(), 12);  // 512 / 128 = 4 steps per epoch
  EXPECT_LT(rows[2].at("train_loss").as_double(), 0.5 * rows[0].at("train_loss").as_double());
  EXPECT_GT(rows[2].at("test_acc").as_double(), 0.9);
}

TEST_F(TrainTest, ResumeEqualsAnUninterruptedRunBitForBit) {
  // simplecnn with dropout on, so the RNG state must be restored too; the break falls mid-epoch.
  std::string common =
      kTrain + " --model simplecnn --threads 2 --epochs 2 --batch-size 64 " + "--data-dir " + data_;
  RunResult a = run(common + " --steps 11 --save " + path("a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b1 = run(common + " --steps 5 --checkpoint " + path("c.safetensors"));
  ASSERT_EQ(b1.code, 0) << b1.output;
  RunResult b2 = run(common + " --steps 11 --resume " + path("c.safetensors") + " --save " +
                     path("b.safetensors"));
  ASSERT_EQ(b2.code, 0) << b2.output;
  EXPECT_NE(b2.output.find("Resumed"), std::string::npos);
  expect_same_bits(path("a.safetensors"), path("b.safetensors"));
}

TEST_F(TrainTest, InitFromAndSaveRoundTrip) {
  RunResult a = run(kTrain + " --model net --steps 2 --data-dir " + data_ + " --save " +
                    path("a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b =
      run(kTrain + " --model net --steps 1 --lr 1e-9 --momentum 0 --dropout 0 " + "--data-dir " +
          data_ + " --init-from " + path("a.safetensors") + " --save " + path("b.safetensors"));
  ASSERT_EQ(b.code, 0) << b.output;
  std::vector<float> wa = floats(load_safetensors(path("a.safetensors")), "fc2.bias");
  std::vector<float> wb = floats(load_safetensors(path("b.safetensors")), "fc2.bias");
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_NEAR(wa[i], wb[i], 1e-6);
  RunResult bad =
      run(kTrain + " --model linear --data-dir " + data_ + " --init-from " + path("a.safetensors"));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("weight"), std::string::npos) << bad.output;
}

TEST_F(TrainTest, DeviceFlagFallsBackToCpuWithANoticeOrTrainsOnCuda) {
  RunResult a = run(kTrain + " --model linear --steps 2 --data-dir " + data_);
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult c = run(kTrain + " --model linear --steps 2 --device cuda --data-dir " + data_);
  if (cuda_device_count() == 0) {
    EXPECT_NE(a.output.find("no CUDA device"), std::string::npos) << a.output;
    EXPECT_NE(a.output.find("training on cpu"), std::string::npos) << a.output;
    EXPECT_NE(c.code, 0);
    EXPECT_NE(c.output.find("--device cuda: no CUDA device"), std::string::npos) << c.output;
  } else {
    EXPECT_EQ(c.code, 0) << c.output;
  }
}
