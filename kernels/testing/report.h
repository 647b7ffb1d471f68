// kernels/testing/report.h: owns gpu_selftest's report of its checks (the kernel-case table's on
// the device, the CUDA test suite's, the collectives'): one row per check (pass, FAIL or skip),
// then the counts; and a check's outcome from the exit codes of the processes (ranks) that ran
// it. A skipped check (it could not run here) is shown as such and never counted as a pass.
// Pure: tested on the CPU (tests/apps/test_gpu_selftest_table.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace engine::kernels::testing {

// Skip: the check could not run here (one GPU where it needs two, no P2P, ...): not a pass.
enum class Outcome : uint8_t { Pass, Fail, Skip };

struct ReportRow {
  std::string group;  // "case", "kernel", "op", "model", "nccl", "comm"
  std::string name;
  Outcome outcome = Outcome::Fail;
  double error = 0;  // max relative error vs the CPU (0 where exact or where a test case decides)
  double tolerance = 0;
  std::string detail;  // why it failed, or a note
};

struct Summary {
  int passed = 0, failed = 0, skipped = 0;
  std::string table;  // the rows and the closing count line
  // The program's exit code: 0 every check passed, 1 one failed, 3 none failed but some skipped.
  int exit_code() const { return failed > 0 ? 1 : skipped > 0 ? 3 : 0; }
};

const char* outcome_name(Outcome o);  // "pass", "FAIL", "skip"
Summary summarize(const std::vector<ReportRow>& rows);

// A process's exit code for "cannot run here" (too few GPUs, no CUDA IPC), as automake's.
constexpr int kSkipCode = 77;
// One check's outcome from its ranks' exit codes: any other non-zero fails it, else any
// kSkipCode skips it (never a pass); *detail gets what each such rank did.
Outcome outcome_of(const std::vector<int>& codes, std::string* detail);

}  // namespace engine::kernels::testing
