// tests/parallel/test_agreement.cpp: rank agreement (parallel/agreement.h): the first difference
// as every rank words it, over lists and over ranks as threads, and the data's fingerprint.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/agreement.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

TEST(Agreement, FirstDisagreementNamesTheSettingAndTheRanks) {
  const std::vector<Setting> a = {{"--lr", "0.01"}, {"--seed", "1"}};
  std::vector<Setting> b = a, c = a;
  b[1].value = "2";
  c[0].value = "";
  EXPECT_EQ(first_disagreement({a, a, a}), "");
  EXPECT_EQ(first_disagreement({}), "");
  EXPECT_EQ(first_disagreement({a, a, b}), "ranks disagree on --seed: 1 on rank 0, 2 on rank 2");
  // The first setting first, whichever rank: c (rank 2) differs on --lr before b on --seed.
  EXPECT_EQ(first_disagreement({a, b, c}),
            "ranks disagree on --lr: 0.01 on rank 0, \"\" on rank 2");
}

TEST(Agreement, DifferentListsAreDifferentBuilds) {
  const std::vector<Setting> a = {{"--lr", "0.01"}, {"--seed", "1"}};
  std::vector<Setting> fewer = {a[0]}, renamed = a;
  renamed[1].name = "--steps";
  EXPECT_EQ(first_disagreement({a, fewer}),
            "ranks disagree on the settings themselves: 2 on rank 0, 1 on rank 1 (different "
            "builds of train?)");
  EXPECT_NE(first_disagreement({a, renamed}).find("--seed on rank 0, --steps on rank 1"),
            std::string::npos);
}

TEST(Agreement, EveryRankThrowsTheSameOverThreads) {
  constexpr int kWorld = 3;
  auto comms = comm::make_mem_communicators(kWorld);
  const std::vector<std::string> errs = testing::run_threads(kWorld, [&](int r) {
    std::vector<Setting> mine = {{"--model", "linear"}, {"--lr", r == 2 ? "0.5" : "0.01"}};
    if (r == 1) mine.push_back({"--extra", std::string(300, 'x')});  // longer than the others
    agree(*comms[r], mine);
  });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(errs[r],
              "ranks disagree on the settings themselves: 2 on rank 0, 3 on rank 1 (different "
              "builds of train?)")
        << "rank " << r;
  auto again = comm::make_mem_communicators(kWorld);
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    agree(*again[r], {{"--model", "linear"}, {"--lr", "0.01"}});
  }));
}

TEST(Agreement, DataSettingsFingerprintEveryFileByName) {
  data::Mnist m;
  for (data::MnistSplit* s : {&m.train, &m.test}) {
    s->count = 2;
    s->rows = s->cols = 2;
    s->images.assign(8, 7);
    s->labels = {1, 2};
  }
  m.train.images_path = "/a/train-images-idx3-ubyte.gz";
  m.train.labels_path = "/a/train-labels-idx1-ubyte";
  m.test.images_path = "/b/t10k-images-idx3-ubyte";
  m.test.labels_path = "/b/t10k-labels-idx1-ubyte";
  const std::vector<Setting> s = data_settings(m);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].name, "the data: train-images-idx3-ubyte");
  EXPECT_EQ(s[0].value.rfind("(2 x 2 x 2 pixels, hash ", 0), 0u) << s[0].value;
  data::Mnist other = m;
  other.train.images[5] = 8;
  EXPECT_NE(data_settings(other)[0].value, s[0].value);
  EXPECT_EQ(data_settings(other)[1].value, s[1].value);
}

}  // namespace
}  // namespace engine::parallel
