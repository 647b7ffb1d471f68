// apps/bench_kernels/reporter.cpp: the fixed-notation console table.
#include "apps/bench_kernels/reporter.h"

#include <cstdio>
#include <ostream>
#include <string>

namespace engine::bench {
namespace {

// The case's name without Google Benchmark's "/real_time" suffix.
std::string case_name(const benchmark::BenchmarkReporter::Run& run) {
  std::string n = run.benchmark_name();
  const std::string tail = "/real_time";
  if (n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0)
    n.resize(n.size() - tail.size());
  return n;
}

std::string counter(const benchmark::BenchmarkReporter::Run& run, const char* key,
                    const char* fmt) {
  auto it = run.counters.find(key);
  if (it == run.counters.end()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, fmt, it->second.value);
  return b;
}

}  // namespace

bool TableReporter::ReportContext(const Context& context) {
  name_field_width_ = context.name_field_width;
  printed_header_ = false;
  prev_counters_.clear();
  GetOutputStream() << preface_;
  PrintBasicContext(&GetOutputStream(), context);
  return true;
}

void TableReporter::PrintHeader(const Run&) {
  char line[256];
  std::snprintf(line, sizeof line, "%-*s %12s %10s %9s %8s %7s %7s %9s\n",
                static_cast<int>(name_field_width_ > 14 ? name_field_width_ - 10 : 4), "case",
                "time(us)", "iters", "GFLOP/s", "GB/s", "%peak", "%ceil", "check_err");
  std::string rule(std::string(line).size() - 1, '-');
  GetOutputStream() << line << rule << "\n";
}

void TableReporter::PrintRunData(const Run& run) {
  const int w = static_cast<int>(name_field_width_ > 14 ? name_field_width_ - 10 : 4);
  char line[512];
  if (run.error_occurred) {
    std::snprintf(line, sizeof line, "%-*s ERROR: %s\n", w, case_name(run).c_str(),
                  run.error_message.c_str());
  } else {
    std::snprintf(line, sizeof line, "%-*s %12.2f %10lld %9s %8s %7s %7s %9s\n", w,
                  case_name(run).c_str(), run.GetAdjustedRealTime(),
                  static_cast<long long>(run.iterations), counter(run, "GFLOP/s", "%.2f").c_str(),
                  counter(run, "GB/s", "%.2f").c_str(), counter(run, "pct_of_peak", "%.1f").c_str(),
                  counter(run, "pct_of_ceiling", "%.1f").c_str(),
                  counter(run, "check_err", "%.1e").c_str());
  }
  GetOutputStream() << line;
}

}  // namespace engine::bench
