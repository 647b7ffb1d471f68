// tests/apps/test_error_file.cpp: torchelastic's error file (apps/error_file.h): the JSON that
// PyTorch's @record writes, written by every program that fails under TORCHELASTIC_ERROR_FILE.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <ctime>

#include "apps/error_file.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::apps;
using namespace engine::testing;

TEST(ErrorFile, TheJsonTorchsRecordWrites) {
  EXPECT_EQ(dump_json(torchelastic_error("train: boom", 1700000000)),
            R"({"message":{"message":"train: boom","extraInfo":{"py_callstack":"train: boom",)"
            R"("timestamp":"1700000000"}}})");
}

TEST(ErrorFile, AFailureNamingAnotherRankIsItsConsequence) {
  EXPECT_TRUE(names_another_rank("rank 0: rank 1 is gone (its process exited)", 0));
  EXPECT_TRUE(names_another_rank("rank 2: the collective was aborted by rank 0: x", 2));
  EXPECT_TRUE(names_another_rank("rendezvous timed out on rank 0: ranks [1, 3] of 4", 0));
  EXPECT_TRUE(names_another_rank("Rank 3 closed the connection", 0));
  EXPECT_FALSE(names_another_rank("rank 1: cannot open /x: No such file", 1));
  EXPECT_FALSE(names_another_rank("rank 1 is local rank 0 but this host has 0 devices", 1));
  EXPECT_FALSE(names_another_rank("--init-from: no such file", 0));
  EXPECT_FALSE(names_another_rank("frank 2 said", 0));
}

TEST_F(TrainTest, AFailingProgramWritesTorchelasticsErrorFile) {
  const std::string file = path("error.json");
  const auto before = std::time(nullptr);
  RunResult r = run("TORCHELASTIC_ERROR_FILE=" + file + " RANK=0 " + kTrain +
                    " --model linear --steps 1 --data-dir " + path("nowhere"));
  ASSERT_EQ(r.code, 1) << r.output;
  Json j = parse_json(read_text(file), file);
  const std::string msg = j["message"]["message"];
  EXPECT_EQ(msg.rfind("train: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("nowhere"), std::string::npos) << msg;
  EXPECT_NE(r.output.find(msg), std::string::npos) << "the line printed on stderr";
  EXPECT_EQ(j["message"]["extraInfo"]["py_callstack"], msg);
  const long ts = std::stol(j["message"]["extraInfo"]["timestamp"].get<std::string>());
  EXPECT_GE(ts, before);
  EXPECT_LE(ts, std::time(nullptr));
  // Without the variable nothing is written; a usage error writes it too.
  RunResult u = run("TORCHELASTIC_ERROR_FILE=" + path("usage.json") + " " + kTrain + " --bogus");
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(read_text(path("usage.json")).find("--bogus"), std::string::npos);
}
