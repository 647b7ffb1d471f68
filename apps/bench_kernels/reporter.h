// apps/bench_kernels/reporter.h: owns bench_kernels' console table: one row per case with time,
// GFLOP/s, GB/s, % of ceiling and the check's error in fixed notation (Google Benchmark's own
// console prints 0.5 as "500m"). --benchmark_format=json|csv bypasses it.
#pragma once
#include <benchmark/benchmark.h>

#include <string>
#include <utility>

namespace engine::bench {

class TableReporter : public benchmark::ConsoleReporter {
 public:
  // preface: lines printed first (the measured peaks), before Google Benchmark's context.
  explicit TableReporter(std::string preface)
      : benchmark::ConsoleReporter(OO_None), preface_(std::move(preface)) {}

  // The run's context (machine, load, our ceilings) on stdout, before the table; Google
  // Benchmark's console reporter sends it to stderr.
  bool ReportContext(const Context& context) override;

 protected:
  void PrintHeader(const Run& run) override;
  void PrintRunData(const Run& run) override;

 private:
  std::string preface_;
};

}  // namespace engine::bench
