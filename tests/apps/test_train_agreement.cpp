// tests/apps/test_train_agreement.cpp: ranks of `train` started by hand with one setting
// different all exit 1 naming it (the flag, or the data file), before training; flags that
// change only one rank's own behaviour, and a .gz copy of the same data, may differ.
#include <string>
#include <tuple>
#include <vector>

#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

// Each rank's exit code and output.
struct Runs {
  std::vector<int> codes;
  std::vector<std::string> outs;
  std::string all;  // everything, for failure messages
};

class Agreement : public TrainTest {
 protected:
  // One rank per element of args, started by hand (no launcher), each with its own arguments.
  Runs ranks(const std::vector<std::string>& args) {
    const std::string common = kTrain + " --model linear --steps 2 --timeout 20 ";
    std::string script = "export WORLD_SIZE=" + std::to_string(args.size()) +
                         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port()) + ";";
    for (size_t r = 0; r < args.size(); ++r)
      script += " RANK=" + std::to_string(r) + " " + common + args[r] + " > " + out(r) +
                " 2>&1 & p" + std::to_string(r) + "=$!;";
    for (size_t r = 0; r < args.size(); ++r)
      script += " wait $p" + std::to_string(r) + "; echo rank" + std::to_string(r) + "-exit=$?;";
    RunResult res = run(script);
    Runs t;
    t.all = res.output;
    for (size_t r = 0; r < args.size(); ++r) {
      t.outs.push_back(read_text(out(r)));
      t.all += "\n--- rank " + std::to_string(r) + ":\n" + t.outs.back();
      const std::string key = "rank" + std::to_string(r) + "-exit=";
      const size_t at = res.output.find(key);
      t.codes.push_back(at == std::string::npos ? -1
                                                : std::atoi(res.output.c_str() + at + key.size()));
    }
    return t;
  }
  std::string out(size_t r) const { return path("out" + std::to_string(r)); }
};

// (flag, value on rank 0, value on rank 1)
class FlagDisagreement
    : public Agreement,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string, std::string>> {};

TEST_P(FlagDisagreement, EveryRankExits1NamingTheFlag) {
  auto [flag, v0, v1] = GetParam();
  const std::string data = " --data-dir " + data_;
  Runs t = ranks({"--" + flag + " " + v0 + data, "--" + flag + " " + v1 + data});
  const std::string want =
      "train: ranks disagree on --" + flag + ": " + v0 + " on rank 0, " + v1 + " on rank 1";
  EXPECT_EQ(t.codes[0], 1) << t.all;
  EXPECT_EQ(t.codes[1], 1) << t.all;
  EXPECT_NE(t.outs[0].find(want), std::string::npos) << want << "\n" << t.all;
  EXPECT_NE(t.outs[1].find(want), std::string::npos) << want << "\n" << t.all;
  EXPECT_EQ(t.outs[0].find("Rank 0, epoch"), std::string::npos) << "nothing trained\n" << t.all;
}

INSTANTIATE_TEST_SUITE_P(
    Train, FlagDisagreement,
    ::testing::Values(
        std::make_tuple("lr", "0.01", "0.5"), std::make_tuple("optimizer", "sgd", "adam"),
        std::make_tuple("seed", "1", "2"), std::make_tuple("sharding", "partition", "sampler"),
        std::make_tuple("dropout", "0", "0.25"), std::make_tuple("momentum", "0.5", "0.9"),
        std::make_tuple("precision", "fp32", "bf16"), std::make_tuple("shuffle", "on", "off"),
        std::make_tuple("model", "linear", "net"), std::make_tuple("batch-size", "64", "128"),
        std::make_tuple("sync", "bucketed", "allreduce"), std::make_tuple("bucket-mb", "25", "1.5"),
        std::make_tuple("epochs", "1", "3"), std::make_tuple("steps", "2", "3")),
    [](const auto& info) {
      std::string s = std::get<0>(info.param);
      for (char& c : s)
        if (c == '-') c = '_';
      return s;
    });

// The transports meet while the communicator connects, before the settings travel: the check
// there (comm/) catches it first, and both ranks still exit 1.
TEST_F(Agreement, DifferentTransportsAreCaughtWhileConnecting) {
  Runs t = ranks({"--transport shm --data-dir " + data_, "--transport tcp --data-dir " + data_});
  EXPECT_EQ(t.codes[0], 1) << t.all;
  EXPECT_EQ(t.codes[1], 1) << t.all;
  EXPECT_NE(t.outs[0].find("ranks disagree on the transport"), std::string::npos) << t.all;
}

TEST_F(Agreement, DifferentDataNamesTheFile) {
  const std::string other = (dir_ / "other").string();
  write_dataset(other, 512, 200);
  std::vector<uint8_t> labels(512, 3);  // the same images, other labels
  data::write_idx(other + "/train-labels-idx1-ubyte.gz", {512}, labels, true);
  Runs t = ranks({"--data-dir " + data_, "--data-dir " + other});
  EXPECT_EQ(t.codes[0], 1) << t.all;
  EXPECT_EQ(t.codes[1], 1) << t.all;
  const std::string want =
      "train: ranks disagree on the data: train-labels-idx1-ubyte: (512 labels";
  EXPECT_NE(t.outs[0].find(want), std::string::npos) << t.all;
  EXPECT_NE(t.outs[1].find(want), std::string::npos) << t.all;
}

// Three ranks: the same number written two ways agrees (--lr comes before --seed); the message
// names rank 0's value and the lowest rank that differs.
TEST_F(Agreement, ThreeRanksNameTheLowestRankThatDiffers) {
  const std::string data = " --data-dir " + data_;
  Runs t = ranks({"--lr 0.010" + data, "--lr 1e-2" + data, "--lr 0.01 --seed 9" + data});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(t.codes[r], 1) << r << "\n" << t.all;
    EXPECT_NE(t.outs[r].find("train: ranks disagree on --seed: 1234 on rank 0, 9 on rank 2"),
              std::string::npos)
        << r << "\n"
        << t.all;
  }
}

TEST_F(Agreement, RankLocalFlagsAndACopyOfTheDataMayDiffer) {
  // Rank 1 reads a raw copy of rank 0's .gz training files from another folder, with its own
  // threads, timeout, --profile, --plot and --rank given outright.
  const std::string copy = (dir_ / "copy").string();
  fs::create_directories(copy);
  for (const std::string f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}) {
    data::IdxArray a = data::read_idx(data_ + "/" + f + ".gz");
    data::write_idx(copy + "/" + f, a.dims, a.data, false);
  }
  for (const std::string f : {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    fs::copy_file(data_ + "/" + f, copy + "/" + f);
  Runs t = ranks({"--data-dir " + data_ + " --threads 1 --metrics " + path("m.jsonl"),
                  "--data-dir " + copy + " --threads 2 --timeout 30 --rank 1 --profile --plot " +
                      path("p.svg")});
  EXPECT_EQ(t.codes[0], 0) << t.all;
  EXPECT_EQ(t.codes[1], 0) << t.all;
  EXPECT_NE(t.outs[0].find("Rank 0, epoch 0"), std::string::npos) << t.all;
}

}  // namespace
