// apps/gpu_selftest/table.cpp: see table.h.
#include "apps/gpu_selftest/table.h"

#include <cstdio>

namespace engine::selftest {

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

Summary summarize(const std::vector<CheckResult>& results) {
  Summary s;
  s.table = row("group", "check", "result", "rel error", "tolerance", "detail");
  for (const CheckResult& r : results) {
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

}  // namespace engine::selftest
