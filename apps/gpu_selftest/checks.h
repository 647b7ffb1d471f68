// apps/gpu_selftest/checks.h: the checks gpu_selftest runs on one CUDA device: each op (forward
// and backward) against the CPU, one training step of each model against the CPU, and NCCL
// collectives over a world of one. Each check catches its own errors.
#pragma once
#include <string>
#include <vector>

#include "core/device.h"

namespace engine::selftest {

struct CheckResult {
  std::string group;  // "op", "model", "nccl"
  std::string name;
  bool passed = false;
  double error = 0;  // max relative error vs the CPU (0 where exact)
  double tolerance = 0;
  std::string detail;  // why it failed, or a note
};

std::vector<CheckResult> run_op_checks(Device dev);
std::vector<CheckResult> run_model_checks(Device dev);
std::vector<CheckResult> run_nccl_checks(Device dev);

}  // namespace engine::selftest
