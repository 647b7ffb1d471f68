// tests/apps/test_gpu_first_run.cpp: scripts/gpu_first_run.sh on a machine without a GPU exits 2
// at once, saying so, and writes no report; its usage and every step's command are in docs/gpu.md.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/common/run.h"
#include "tests/common/temp_dir.h"

namespace engine::testing {
namespace {

std::string source_root() {
  return ENGINE_SOURCE_DIR;
}

TEST(GpuFirstRun, WithoutAGpuItExitsTwoAtOnceSayingSo) {
  const std::string script = source_root() + "/scripts/gpu_first_run.sh";
  ASSERT_EQ(access(script.c_str(), X_OK), 0) << script << " is not executable";
  TempDir dir;
  const std::string report = dir.file("report.md");
  // An nvidia-smi that lists nothing (here there is none at all; on a GPU machine: /bin/false).
  for (const char* smi : {"/bin/false", "/nonexistent/nvidia-smi"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const RunResult r = run("NVIDIA_SMI=" + std::string(smi) + " REPORT=" + report + " " + script);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("gpu_first_run: no NVIDIA GPU on this machine"), std::string::npos)
        << r.output;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "not at once";
    EXPECT_NE(access(report.c_str(), F_OK), 0) << "no report without a GPU";
  }
}

// Each step of the script is a command docs/gpu.md documents.
TEST(GpuFirstRun, ReadmeDocumentsTheScriptAndEveryStep) {
  const std::string readme = read_text(source_root() + "/docs/gpu.md");
  for (const char* cmd : {
           "scripts/gpu_first_run.sh",
           "cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DENGINE_CUDA=ON",
           "ctest --test-dir build-gpu -R 'Cuda|cuda|DeviceOps|Nccl|RingPeers|Watchdog|Gpu|"
           "DataParallel|TwoGpu' --output-on-failure",
           "build-gpu/apps/gpu_selftest",
           "compute-sanitizer --tool memcheck --error-exitcode 99 build-gpu/tests/test_kernels "
           "--gtest_filter='CudaKernels.*'",
           "compute-sanitizer --tool memcheck --error-exitcode 99 build-gpu/apps/train --model "
           "simplecnn --steps 20 --device cuda",
           "build-gpu/apps/train --model simplecnn --epochs 1 --device cuda --metrics "
           "out/gpu.jsonl",
           "ENGINE_CUDA_RING=ipc build-gpu/apps/launch --nproc-per-node 2 -- build-gpu/apps/train "
           "--model simplecnn --dropout 0 --sharding sampler --shuffle off --steps 20 --device "
           "cuda",
           "nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader",
           "build-gpu/apps/bench_kernels --device cuda",
           "build-gpu/apps/allreduce_bench --world-size 2 --device cuda --backend nccl "
           "--collective "
           "all",
       })
    EXPECT_NE(readme.find(cmd), std::string::npos) << "docs/gpu.md lacks: " << cmd;
}

}  // namespace
}  // namespace engine::testing
