// apps/gpu_selftest/table.h: gpu_selftest's report: one row per check (pass, FAIL or skip), then
// the counts. A skipped check (it could not run here) is shown as such and never counted as a
// pass. Pure: tested on the CPU (tests/apps/test_gpu_selftest_table.cpp).
#pragma once
#include <string>
#include <vector>

#include "apps/gpu_selftest/checks.h"

namespace engine::selftest {

struct Summary {
  int passed = 0, failed = 0, skipped = 0;
  std::string table;  // the rows and the closing count line
  // The program's exit code: 0 every check passed, 1 one failed, 3 none failed but some skipped.
  int exit_code() const { return failed > 0 ? 1 : skipped > 0 ? 3 : 0; }
};

const char* outcome_name(Outcome o);  // "pass", "FAIL", "skip"
Summary summarize(const std::vector<CheckResult>& results);

}  // namespace engine::selftest
