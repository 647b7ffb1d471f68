// tests/apps/test_train_agreement.cpp: two ranks of `train` started by hand with one setting
// different both exit 1 naming it (the flag, or the data file), before training; flags that
// change only one rank's own behaviour, and a .gz copy of the same data, may differ.
#include <string>
#include <tuple>

#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

// Both ranks' exit codes and outputs, each rank with its own extra arguments.
struct TwoRuns {
  int code0 = -1, code1 = -1;
  std::string out0, out1, all;
};

class Agreement : public TrainTest {
 protected:
  TwoRuns two_ranks(const std::string& args0, const std::string& args1) {
    const std::string common = kTrain + " --model linear --steps 2 --timeout 20 ";
    const std::string o0 = path("out0"), o1 = path("out1");
    RunResult r =
        run("export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port()) +
            "; RANK=0 " + common + args0 + " > " + o0 + " 2>&1 & p0=$!; RANK=1 " + common + args1 +
            " > " + o1 + " 2>&1; echo rank1-exit=$?; wait $p0; echo rank0-exit=$?");
    TwoRuns t;
    t.out0 = read_text(o0);
    t.out1 = read_text(o1);
    t.all = r.output + "\n--- rank 0:\n" + t.out0 + "\n--- rank 1:\n" + t.out1;
    auto code = [&](const std::string& key) {
      const size_t at = r.output.find(key);
      return at == std::string::npos ? -1 : std::atoi(r.output.c_str() + at + key.size());
    };
    t.code0 = code("rank0-exit=");
    t.code1 = code("rank1-exit=");
    return t;
  }
};

// (flag, value on rank 0, value on rank 1)
class FlagDisagreement
    : public Agreement,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string, std::string>> {};

TEST_P(FlagDisagreement, EveryRankExits1NamingTheFlag) {
  auto [flag, v0, v1] = GetParam();
  const std::string data = " --data-dir " + data_;
  TwoRuns t = two_ranks("--" + flag + " " + v0 + data, "--" + flag + " " + v1 + data);
  const std::string want =
      "train: ranks disagree on --" + flag + ": " + v0 + " on rank 0, " + v1 + " on rank 1";
  EXPECT_EQ(t.code0, 1) << t.all;
  EXPECT_EQ(t.code1, 1) << t.all;
  EXPECT_NE(t.out0.find(want), std::string::npos) << want << "\n" << t.all;
  EXPECT_NE(t.out1.find(want), std::string::npos) << want << "\n" << t.all;
  EXPECT_EQ(t.out0.find("Rank 0, epoch"), std::string::npos) << "nothing trained\n" << t.all;
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
  TwoRuns t =
      two_ranks("--transport shm --data-dir " + data_, "--transport tcp --data-dir " + data_);
  EXPECT_EQ(t.code0, 1) << t.all;
  EXPECT_EQ(t.code1, 1) << t.all;
  EXPECT_NE(t.out0.find("ranks disagree on the transport"), std::string::npos) << t.all;
}

TEST_F(Agreement, DifferentDataNamesTheFile) {
  const std::string other = (dir_ / "other").string();
  write_dataset(other, 512, 200);
  std::vector<uint8_t> labels(512, 3);  // the same images, other labels
  data::write_idx(other + "/train-labels-idx1-ubyte.gz", {512}, labels, true);
  TwoRuns t = two_ranks("--data-dir " + data_, "--data-dir " + other);
  EXPECT_EQ(t.code0, 1) << t.all;
  EXPECT_EQ(t.code1, 1) << t.all;
  const std::string want =
      "train: ranks disagree on the data: train-labels-idx1-ubyte: (512 labels";
  EXPECT_NE(t.out0.find(want), std::string::npos) << t.all;
  EXPECT_NE(t.out1.find(want), std::string::npos) << t.all;
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
  TwoRuns t = two_ranks("--data-dir " + data_ + " --threads 1 --metrics " + path("m.jsonl"),
                        "--data-dir " + copy +
                            " --threads 2 --timeout 30 --rank 1 --profile --plot " + path("p.svg"));
  EXPECT_EQ(t.code0, 0) << t.all;
  EXPECT_EQ(t.code1, 0) << t.all;
  EXPECT_NE(t.out0.find("Rank 0, epoch 0"), std::string::npos) << t.all;
}

}  // namespace
