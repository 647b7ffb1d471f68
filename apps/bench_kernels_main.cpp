// apps/bench_kernels_main.cpp: kernel microbenchmarks, llm.c dev/cuda style: every case is
// checked against the plain reference (kernels/cpu/reference.h) before it is timed, and reported
// against the machine's ceilings measured at start. Google Benchmark runs the cases, so
// --benchmark_filter, --benchmark_format=json, --benchmark_min_time, ... all work.
// --device cuda runs the same cases on a GPU (kernels/cuda), checked against the same reference
// and reported against the GPU's ceilings (cuBLAS SGEMM, device-to-device copy); exit code 2 when
// no CUDA device answers.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "apps/bench_kernels/cases.h"
#include "apps/bench_kernels/ceiling.h"
#include "apps/bench_kernels/cuda_ceiling.h"
#include "apps/bench_kernels/reporter.h"
#include "apps/bench_kernels/shapes.h"
#include "apps/flags.h"
#include "core/device.h"
#include "core/thread_pool.h"

namespace {

constexpr const char* kUsage =
    "usage: bench_kernels [--threads N] [--device cpu|cuda] [--benchmark_filter=REGEX]\n"
    "                     [--benchmark_format=json] [--benchmark_min_time=SECONDS]\n"
    "                     [--benchmark_out=FILE] ...\n"
    "  --threads N   engine (and OpenBLAS) threads; default: all cores\n"
    "  --device D    cpu (default), or cuda (cuda:0; cuda:N for another GPU): the same cases\n"
    "                on the GPU, against its cuBLAS SGEMM and device-to-device copy ceilings;\n"
    "                exit status 2 when no CUDA device answers\n"
    "  A case is checked against the reference before it is timed; a failed check skips it\n"
    "  and makes the exit status 1. --benchmark_min_time defaults to 0.2 here.";

// Takes `--threads N` / `--threads=N` out of argv (Google Benchmark rejects flags it does not
// know); returns N, or 0 when absent.
int take_threads_flag(int* argc, char** argv) {
  int threads = 0, out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    std::string value;
    if (a == "--threads") {
      if (i + 1 >= *argc) throw engine::Error("--threads needs a value");
      value = argv[++i];
    } else if (a.rfind("--threads=", 0) == 0) {
      value = a.substr(10);
    } else {
      argv[out++] = argv[i];
      continue;
    }
    threads = static_cast<int>(engine::apps::Flags::parse_int("threads", value));
    if (threads < 1) throw engine::Error("--threads must be at least 1");
  }
  *argc = out;
  argv[out] = nullptr;
  return threads;
}

// Takes `--device D` / `--device=D` out of argv; returns D, or "cpu" when absent.
std::string take_device_flag(int* argc, char** argv) {
  std::string device = "cpu";
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    if (a == "--device") {
      if (i + 1 >= *argc) throw engine::Error("--device needs a value (cpu or cuda)");
      device = argv[++i];
    } else if (a.rfind("--device=", 0) == 0) {
      device = a.substr(9);
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return device;
}

bool has_flag(int argc, char** argv, const char* prefix) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

// Whether the display format is the console table (not --benchmark_format=json or csv).
bool console_format(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_format=", 19) == 0)
      return std::strcmp(argv[i] + 19, "console") == 0;
  return true;
}

int run(int argc, char** argv) {
  if (has_flag(argc, argv, "--help") || has_flag(argc, argv, "-h")) std::puts(kUsage);
  const int threads = take_threads_flag(&argc, argv);
  const engine::Device device = engine::Device::parse(take_device_flag(&argc, argv));
  engine::set_num_threads(threads > 0 ? threads : engine::hardware_threads());

  // Our default minimum time per case, unless given (150-odd cases on 2 cores).
  std::vector<char*> args(argv, argv + argc);
  std::string min_time = "--benchmark_min_time=0.2";
  if (!has_flag(argc, argv, "--benchmark_min_time")) args.push_back(min_time.data());
  int nargs = static_cast<int>(args.size());
  args.push_back(nullptr);
  const bool console = console_format(nargs, args.data());  // before Initialize eats the flags
  benchmark::Initialize(&nargs, args.data());
  if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) return 2;
  if (const std::string why = device.is_cuda() ? engine::cuda_device_problem(device.index) : "";
      !why.empty()) {
    std::fprintf(stderr, "bench_kernels: %s\n", why.c_str());
    return 2;
  }

  // Reported in the run's context, which Google Benchmark prints (or writes into the JSON)
  // before any case; with JSON or CSV on stdout, also on stderr for people.
  auto say = [&](const std::string& key, const std::string& value) {
    benchmark::AddCustomContext(key, value);
    if (!console) std::fprintf(stderr, "%s: %s\n", key.c_str(), value.c_str());
  };
  say("threads", std::to_string(engine::num_threads()));
  std::vector<engine::bench::Failure> failures;
  if (device.is_cpu()) {
    if (engine::cuda_device_count() == 0)
      say("cuda", "cases skipped: " + engine::cuda_unavailable_reason());
    else
      say("cuda", std::to_string(engine::cuda_device_count()) +
                      " device(s) answer; --device cuda runs the cases on one");

    engine::bench::verify_sites_against_models();
    const engine::bench::Ceilings ceilings = engine::bench::measure_ceilings();
    for (auto& [key, value] : engine::bench::describe(ceilings)) say(key, value);
    engine::bench::register_cpu_cases(ceilings, &failures);
  } else {
    engine::bench::verify_sites_against_models();
    const engine::bench::CudaCeilings ceilings = engine::bench::measure_cuda_ceilings(device.index);
    for (auto& [key, value] : engine::bench::describe(ceilings)) say(key, value);
    say("cuda_cases", "the CPU cases' names on " + device.str() +
                          ", checked against the same reference; idx_decode, normalize and comm's "
                          "reduce_into have no device kernel and are not run");
    engine::bench::register_cuda_cases(ceilings, &failures);
  }
  engine::bench::TableReporter table;
  benchmark::RunSpecifiedBenchmarks(console ? &table : nullptr);
  benchmark::Shutdown();

  for (auto& f : failures)
    std::fprintf(stderr, "FAILED %s: %s\n", f.name.c_str(), f.message.c_str());
  if (!failures.empty()) {
    std::fprintf(stderr, "bench_kernels: %zu case(s) failed their check and were not timed\n",
                 failures.size());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
}
