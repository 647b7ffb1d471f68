// tests/io/test_torchelastic_error.cpp: torchelastic's error file (io/torchelastic_error.h): the
// JSON that PyTorch's @record writes, and which failures are another rank's consequence.
#include <gtest/gtest.h>

#include "io/torchelastic_error.h"

using namespace engine;

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
