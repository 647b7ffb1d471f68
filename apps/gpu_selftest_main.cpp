// apps/gpu_selftest_main.cpp: `gpu_selftest`, the first program to run on a machine with a GPU.
// It runs the kernel-case table on the device, checks every CUDA op against the CPU (forward and
// backward), one training step of each model, NCCL collectives in one process, and an all_reduce
// between two ranks (child processes) over each backend (ring staged, ring IPC, NCCL), then prints
// a pass/fail table (kernels/testing/report.h).
// Exit code: 0 all passed, 1 a check failed, 2 no CUDA device (the reason is printed) or bad use,
// 3 none failed but some were skipped (shown as "skip", never counted as passed).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/gpu_selftest/checks.h"
#include "apps/gpu_selftest/multi_rank.h"
#include "apps/program.h"
#include "core/cuda_backend.h"
#include "core/device.h"
#include "kernels/testing/report.h"

namespace {

const char kUsage[] =
    "usage: gpu_selftest [--device cuda:N]\n"
    "Checks each CUDA kernel against the CPU, one training step of each model on the GPU against\n"
    "the CPU, NCCL collectives (world 1), and an all_reduce between 2 ranks (child processes)\n"
    "over each backend: ring staged, ring IPC, NCCL; prints a pass/fail table.\n"
    "A check that cannot run here (a second GPU, CUDA IPC) is shown as skip, not as a pass.\n"
    "Exit code: 0 all passed, 1 a check failed, 2 no CUDA device or bad flags, 3 none failed\n"
    "but some were skipped.";

// The checks on dev, then the table; returns the exit code (table.h).
int run_checks(engine::Device dev) {
  using namespace engine;
  std::printf("gpu_selftest on %s: every result compared with the CPU's\n\n", dev.str().c_str());
  std::vector<selftest::CheckResult> all;
  for (auto* run :
       {&selftest::run_table_cases, &selftest::run_test_cases, &selftest::run_nccl_checks}) {
    std::vector<selftest::CheckResult> part = (*run)(dev);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::vector<selftest::CheckResult> part = selftest::run_multi_rank_checks(dev, "/proc/self/exe");
  all.insert(all.end(), part.begin(), part.end());
  const kernels::testing::Summary s = kernels::testing::summarize(all);
  std::printf("%s", s.table.c_str());
  return s.exit_code();
}

int run(int argc, char** argv) {
  using namespace engine;
  if (argc >= 2 && std::string(argv[1]) == "--child") {  // a rank of the two-rank checks
    ENGINE_USAGE_CHECK(argc == 6, "--child takes BACKEND RANK WORLD DIR");
    const int64_t world = apps::Flags::parse_int("child WORLD", argv[4]);
    apps::check_range("--child WORLD", world, 1, 64);
    const int64_t rank = apps::Flags::parse_int("child RANK", argv[3]);
    apps::check_range("--child RANK", rank, 0, world - 1);
    return selftest::run_child(argv[2], static_cast<int>(rank), static_cast<int>(world), argv[5]);
  }
  std::string device = "cuda:0";
  apps::Flags flags(kUsage);
  flags.add("device", &device, "the CUDA device to check");
  if (!flags.parse(argc, argv)) return 0;
  ENGINE_USAGE_CHECK(flags.rest().empty(), "unexpected argument '", flags.rest()[0], "'");
  Device dev;
  apps::as_usage_error([&] { dev = Device::parse(device); });
  ENGINE_USAGE_CHECK(dev.is_cuda(), "--device must be a CUDA device, got ", device);
  if (const std::string why = cuda_device_problem(dev.index); !why.empty()) {
    std::fprintf(stderr, "gpu_selftest: cannot run: %s\n", why.c_str());
    return 2;  // the documented "no CUDA device" status
  }
  cuda::set_home_device(dev.index);  // this thread and the communicator's: the checked device
  return run_checks(dev);
}

}  // namespace

int main(int argc, char** argv) {
  return engine::apps::run_program("gpu_selftest", argc, argv, run);
}
