// apps/gpu_selftest_main.cpp: `gpu_selftest`, the first program to run on a machine with a GPU.
// It checks every CUDA op against the CPU (forward and backward), one training step of each
// model, NCCL collectives in one process, and an all_reduce between two ranks (child processes)
// over each backend (ring staged, ring IPC, NCCL), then prints a pass/fail table.
// Exit code: 0 all passed, 1 a check failed, 2 no CUDA device (the reason is printed), 3 bad use.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "apps/gpu_selftest/checks.h"
#include "apps/gpu_selftest/multi_rank.h"
#include "core/device.h"

namespace {

const char kUsage[] =
    "usage: gpu_selftest [--device cuda:N]\n"
    "Checks each CUDA kernel against the CPU, one training step of each model on the GPU against\n"
    "the CPU, NCCL collectives (world 1), and an all_reduce between 2 ranks (child processes)\n"
    "over each backend: ring staged, ring IPC, NCCL; prints a pass/fail table.\n"
    "Exit code: 0 all passed, 1 a check failed, 2 no CUDA device.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace engine;
  std::string device = "cuda:0";
  if (argc == 6 && std::string(argv[1]) == "--child")  // a rank of the two-rank checks
    return selftest::run_child(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), argv[5]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      device = argv[++i];
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "gpu_selftest: unknown argument '%s'\n%s", a.c_str(), kUsage);
      return 3;
    }
  }
  Device dev;
  try {
    dev = Device::parse(device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_selftest: %s\n", e.what());
    return 3;
  }
  if (!dev.is_cuda()) {
    std::fprintf(stderr, "gpu_selftest: --device must be a CUDA device, got %s\n", device.c_str());
    return 3;
  }
  if (const std::string why = cuda_device_problem(dev.index); !why.empty()) {
    std::fprintf(stderr, "gpu_selftest: cannot run: %s\n", why.c_str());
    return 2;
  }

  std::printf("gpu_selftest on %s: every result compared with the CPU's\n\n", dev.str().c_str());
  std::vector<selftest::CheckResult> all;
  for (auto* run : {&selftest::run_test_cases, &selftest::run_nccl_checks}) {
    std::vector<selftest::CheckResult> part = (*run)(dev);
    all.insert(all.end(), part.begin(), part.end());
  }
  {
    std::vector<selftest::CheckResult> part =
        selftest::run_multi_rank_checks(dev, "/proc/self/exe");
    all.insert(all.end(), part.begin(), part.end());
  }
  std::printf("%-6s %-42s %-6s %12s %10s  %s\n", "group", "check", "result", "rel error",
              "tolerance", "detail");
  int failed = 0;
  for (const auto& r : all) {
    failed += !r.passed;
    std::printf("%-6s %-42s %-6s %12.3g %10.3g  %s\n", r.group.c_str(), r.name.c_str(),
                r.passed ? "pass" : "FAIL", r.error, r.tolerance, r.detail.c_str());
  }
  std::printf("\n%zu checks, %d failed\n", all.size(), failed);
  return failed ? 1 : 0;
}
