// apps/bench_kernels_main.cpp: kernel microbenchmarks, llm.c dev/cuda style: every case is
// checked against the plain reference (kernels/cpu/reference.h) before it is timed, and reported
// against the machine's ceilings measured at start. Google Benchmark runs the cases, so
// --benchmark_filter, --benchmark_format=json, --benchmark_min_time, ... all work.
// --device cuda runs the same cases on a GPU (kernels/cuda), checked against the same reference
// and reported against the GPU's ceilings (cuBLAS SGEMM, device-to-device copy); exit code 2 when
// no CUDA device answers.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "apps/bench_kernels/cases.h"
#include "apps/bench_kernels/ceiling.h"
#include "apps/bench_kernels/cuda_ceiling.h"
#include "apps/bench_kernels/reporter.h"
#include "apps/bench_kernels/shapes.h"
#include "apps/program.h"
#include "core/device.h"
#include "core/knobs.h"
#include "core/thread_pool.h"
#include "io/json.h"

namespace {

constexpr const char* kUsage =
    "usage: bench_kernels [--threads N] [--device cpu|cuda] [--cuda-kernels library|engine|both]\n"
    "                     [--peak] [--benchmark_filter=REGEX]\n"
    "                     [--benchmark_format=json] [--benchmark_min_time=SECONDS]\n"
    "                     [--benchmark_out=FILE] ...\n"
    "A case is checked against the reference before it is timed; a failed check skips it\n"
    "and makes the exit status 1. Exit status 2 for bad flags, or when --device cuda finds no\n"
    "CUDA device. Google Benchmark's flags (--benchmark_*, --v; below) pass through;\n"
    "--benchmark_min_time defaults to 0.2 here.";

struct Options {
  int64_t threads = 0;  // 0: all cores
  std::string device = "cpu";
  std::string cuda_kernels = "both";
  bool peak = false;
  std::vector<std::string> benchmark_flags;  // --benchmark_*, for Google Benchmark
};

// Parses our flags and keeps Google Benchmark's; returns false when --help was printed.
bool parse_args(int argc, char** argv, Options* o) {
  engine::apps::Flags f(kUsage);
  // Without --cuda-kernels, ENGINE_CUDA_KERNELS chooses when set (docs/knobs.md), else both run.
  if (engine::knobs::given("ENGINE_CUDA_KERNELS")) o->cuda_kernels = engine::knobs::cuda_kernels();
  f.pass_through("--benchmark_");
  f.pass_through("--v=");  // Google Benchmark's verbosity
  f.add("threads", &o->threads, "engine (and OpenBLAS) threads; 0: all cores");
  f.add_switch(
      "peak", &o->peak,
      "only measure the FMA and bf16 dot-product peaks (all threads and one) and print them "
      "as one JSON line");
  f.add("device", &o->device,
        "cpu, or cuda / cuda:N: the same cases on a GPU, against its own ceilings");
  f.add_choice("cuda-kernels", &o->cuda_kernels, {"library", "engine", "both"},
               "with --device cuda: the library's kernels (the rows' plain names), the engine's "
               "own (rows ending /engine, in place of the rows they twin), or both side by side; "
               "the CPU cases accept it and change nothing");
  if (!f.parse(argc, argv)) {
    std::printf("\nGoogle Benchmark's flags:\n");
    benchmark::PrintDefaultHelp();
    return false;
  }
  ENGINE_USAGE_CHECK(f.rest().empty(), "unexpected argument '", f.rest()[0], "'");
  engine::apps::check_range("--threads", o->threads, 0, engine::apps::kMaxThreads);
  o->benchmark_flags = f.passed_through();
  return true;
}

bool has_flag(const std::vector<std::string>& flags, const std::string& prefix) {
  for (const std::string& f : flags)
    if (f.rfind(prefix, 0) == 0) return true;
  return false;
}

// Whether the display format is the console table (not --benchmark_format=json or csv).
bool console_format(const std::vector<std::string>& flags) {
  for (const std::string& f : flags)
    if (f.rfind("--benchmark_format=", 0) == 0) return f.substr(19) == "console";
  return true;
}

// Hands Google Benchmark its flags (with our default minimum time per case, unless given: 150-odd
// cases on 2 cores); a flag it does not know is a usage error.
void init_benchmark(const char* program, std::vector<std::string> flags) {
  if (!has_flag(flags, "--benchmark_min_time")) flags.push_back("--benchmark_min_time=0.2");
  std::vector<char*> args = {const_cast<char*>(program)};
  for (std::string& f : flags) args.push_back(f.data());
  int nargs = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&nargs, args.data());
  ENGINE_USAGE_CHECK(nargs <= 1, "unknown flag ", nargs > 1 ? args[1] : "");
}

// Measures the device's ceilings and registers its cases, which add to *failures as they run;
// say() reports a line of context. Returns the lines the console table starts with: the peaks.
std::string register_cases(engine::Device device, const std::string& cuda_kernels,
                           const std::function<void(const std::string&, const std::string&)>& say,
                           std::vector<engine::bench::Failure>* failures) {
  engine::bench::verify_sites_against_models();
  if (device.is_cpu()) {
    const engine::bench::Ceilings ceilings = engine::bench::measure_ceilings();
    for (auto& [key, value] : engine::bench::describe(ceilings)) say(key, value);
    if (engine::cuda_device_count() == 0)
      say("cuda", "cases skipped: " + engine::cuda_unavailable_reason());
    else
      say("cuda", std::to_string(engine::cuda_device_count()) +
                      " device(s) answer; --device cuda runs the cases on one");
    engine::bench::register_cpu_cases(ceilings, failures);
    std::string preface;
    for (auto& [key, value] : engine::bench::describe_peaks(ceilings))
      preface += key + ": " + value + "\n";
    return preface;
  } else {
    const engine::bench::CudaCeilings ceilings = engine::bench::measure_cuda_ceilings(device.index);
    for (auto& [key, value] : engine::bench::describe(ceilings)) say(key, value);
    say("cuda_cases", "the CPU cases' names on " + device.str() +
                          ", checked against the same reference; idx_decode, normalize and comm's "
                          "reduce_into have no device kernel and are not run");
    say("cuda_kernels", cuda_kernels + " (rows ending /engine: --cuda-kernels engine)");
    engine::bench::register_cuda_cases(ceilings, cuda_kernels, failures);
  }
  return "";
}

// --peak: {"threads", "isa", "fp32_gflops", "bf16_gflops", "fp32_gflops_1thread",
// "bf16_gflops_1thread"} on one line (bf16 0 without AVX512_BF16).
int print_peaks() {
  const engine::bench::Ceilings c = engine::bench::measure_peaks();
  engine::Json j = {{"threads", c.threads},
                    {"isa", c.peak.isa},
                    {"fp32_gflops", c.peak.fp32_gflops},
                    {"bf16_gflops", c.peak.bf16_gflops},
                    {"fp32_gflops_1thread", c.peak1.fp32_gflops},
                    {"bf16_gflops_1thread", c.peak1.bf16_gflops}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int run(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) return 0;
  engine::Device device;
  engine::apps::as_usage_error([&] { device = engine::Device::parse(o.device); });
  engine::set_num_threads(o.threads > 0 ? static_cast<int>(o.threads) : engine::hardware_threads());
  if (o.peak) {
    ENGINE_USAGE_CHECK(device.is_cpu(), "--peak measures the CPU; it takes no --device");
    return print_peaks();
  }
  const bool console = console_format(o.benchmark_flags);
  init_benchmark(argv[0], o.benchmark_flags);
  if (const std::string why = device.is_cuda() ? engine::cuda_device_problem(device.index) : "";
      !why.empty()) {
    std::fprintf(stderr, "bench_kernels: %s\n", why.c_str());
    return 2;  // the documented "no CUDA device" status
  }

  // Reported in the run's context, which Google Benchmark prints (or writes into the JSON)
  // before any case; with JSON or CSV on stdout, also on stderr for people.
  auto say = [&](const std::string& key, const std::string& value) {
    benchmark::AddCustomContext(key, value);
    if (!console) std::fprintf(stderr, "%s: %s\n", key.c_str(), value.c_str());
  };
  say("threads", std::to_string(engine::num_threads()));
  std::vector<engine::bench::Failure> failures;
  engine::bench::TableReporter table(register_cases(device, o.cuda_kernels, say, &failures));
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
  return engine::apps::run_program("bench_kernels", argc, argv, run);
}
