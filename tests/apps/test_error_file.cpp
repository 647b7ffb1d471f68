// tests/apps/test_error_file.cpp: torchelastic's error file (io/torchelastic_error.h), written by
// every program that fails under TORCHELASTIC_ERROR_FILE (the JSON itself: tests/io/
// test_torchelastic_error.cpp).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <ctime>

#include "io/json.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

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
