// tests/apps/test_gpu_selftest_table.cpp: gpu_selftest's table and exit code and the two-rank
// checks' outcome from the ranks' exit codes (kernels/testing/report.h): issue 14 finding 3, a
// check skipped (one GPU, no CUDA IPC) is shown as skip and never counted as a pass.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/testing/report.h"

namespace engine::kernels::testing {
namespace {

ReportRow check(const char* name, Outcome o, const char* detail = "") {
  return {"comm", name, o, 0.0, 0.0, detail};
}

TEST(GpuSelftestTable, SkippedIsShownAsSuchAndNotCountedAsPassed) {
  const Summary s = summarize(
      {check("ring-staged all_reduce, 2 ranks", Outcome::Pass),
       check("nccl all_reduce, 2 ranks", Outcome::Skip, "skipped by rank 0 (reason above)")});
  EXPECT_EQ(s.passed, 1);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.exit_code(), 3);
  EXPECT_NE(s.table.find("nccl all_reduce, 2 ranks                   skip"), std::string::npos)
      << s.table;
  EXPECT_EQ(s.table.find("nccl all_reduce, 2 ranks                   pass"), std::string::npos);
  EXPECT_NE(s.table.find("2 checks: 1 passed, 0 failed, 1 skipped"), std::string::npos) << s.table;
}

TEST(GpuSelftestTable, ExitCodes) {
  EXPECT_EQ(summarize({check("a", Outcome::Pass)}).exit_code(), 0);
  EXPECT_EQ(
      summarize({check("a", Outcome::Pass), check("b", Outcome::Fail), check("c", Outcome::Skip)})
          .exit_code(),
      1);
  const Summary f = summarize({check("b", Outcome::Fail, "rank 1 exited 1")});
  EXPECT_NE(f.table.find("FAIL"), std::string::npos);
  EXPECT_NE(f.table.find("rank 1 exited 1"), std::string::npos);
}

TEST(GpuSelftestTable, RanksExitCodesGiveTheOutcome) {
  std::string d;
  EXPECT_EQ(outcome_of({0, 0}, &d), Outcome::Pass);
  EXPECT_EQ(d, "");
  EXPECT_EQ(outcome_of({kSkipCode, kSkipCode}, &d), Outcome::Skip);
  EXPECT_EQ(d, "skipped by rank 0 (reason above); skipped by rank 1 (reason above)");
  d.clear();
  EXPECT_EQ(outcome_of({0, kSkipCode}, &d), Outcome::Skip);  // the case that used to pass
  d.clear();
  EXPECT_EQ(outcome_of({kSkipCode, 1}, &d), Outcome::Fail);
  EXPECT_NE(d.find("rank 1 exited 1"), std::string::npos);
  d.clear();
  EXPECT_EQ(outcome_of({0, 137}, &d), Outcome::Fail);
  EXPECT_EQ(d, "rank 1 exited 137");
}

}  // namespace
}  // namespace engine::kernels::testing
