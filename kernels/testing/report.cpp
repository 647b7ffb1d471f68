// kernels/testing/report.cpp: see report.h.
#include "kernels/testing/report.h"

#include <cstdio>

namespace engine::kernels::testing {

const char* outcome_name(Outcome o) {
  static const char* const kNames[] = {"pass", "FAIL", "skip"};  // Outcome's order
  return kNames[static_cast<int>(o)];
}

namespace {
std::string row(const char* group, const char* check, const char* result, const char* err,
                const char* tol, const char* detail) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-6s %-42s %-6s %12s %10s  ", group, check, result, err, tol);
  return std::string(buf) + detail + "\n";
}
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
}  // namespace

Summary summarize(const std::vector<ReportRow>& results) {
  Summary s;
  s.table = row("group", "check", "result", "rel error", "tolerance", "detail");
  for (const ReportRow& r : results) {
    s.passed += r.outcome == Outcome::Pass;
    s.failed += r.outcome == Outcome::Fail;
    s.skipped += r.outcome == Outcome::Skip;
    const bool ran = r.outcome != Outcome::Skip;
    s.table += row(r.group.c_str(), r.name.c_str(), outcome_name(r.outcome),
                   ran ? num(r.error).c_str() : "-", ran ? num(r.tolerance).c_str() : "-",
                   r.detail.c_str());
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, "\n%zu checks: %d passed, %d failed, %d skipped\n",
                results.size(), s.passed, s.failed, s.skipped);
  s.table += tail;
  return s;
}

Outcome outcome_of(const std::vector<int>& codes, std::string* detail) {
  bool failed = false, skipped = false;
  for (size_t k = 0; k < codes.size(); ++k) {
    if (codes[k] == 0) continue;
    if (codes[k] == kSkipCode) {
      skipped = true;
      *detail += "skipped by rank " + std::to_string(k) + " (reason above); ";
    } else {
      failed = true;
      *detail += "rank " + std::to_string(k) + " exited " + std::to_string(codes[k]) + "; ";
    }
  }
  if (!detail->empty()) detail->resize(detail->size() - 2);
  return failed ? Outcome::Fail : skipped ? Outcome::Skip : Outcome::Pass;
}

}  // namespace engine::kernels::testing
