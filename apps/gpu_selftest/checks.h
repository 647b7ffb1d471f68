// apps/gpu_selftest/checks.h: the checks gpu_selftest runs on one CUDA device: the CUDA test
// suite's own cases (tests/kernels/test_cuda_kernels.cpp: each kernel against its CPU twin;
// tests/nn/test_device_ops.cpp: each op forward and backward, and one training step of each
// model, against the CPU), and NCCL collectives over a world of one. Each check catches its own
// errors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace engine::selftest {

// Skip: the check could not run here (one GPU where it needs two, no P2P, ...): not a pass.
enum class Outcome : uint8_t { Pass, Fail, Skip };

struct CheckResult {
  std::string group;  // "kernel", "op", "model", "nccl", "comm"
  std::string name;
  Outcome outcome = Outcome::Fail;
  double error = 0;  // max relative error vs the CPU (0 where exact or where a test case decides)
  double tolerance = 0;
  std::string detail;  // why it failed, or a note
};

// The CUDA suite's test cases (GoogleTest, linked in from tests/) on dev, one result per case.
// Runs them once per process.
std::vector<CheckResult> run_test_cases(Device dev);
std::vector<CheckResult> run_nccl_checks(Device dev);

}  // namespace engine::selftest
