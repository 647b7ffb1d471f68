// apps/gpu_selftest/checks.h: the checks gpu_selftest runs on one CUDA device: the kernel-case
// table's CUDA cases (kernels/testing/table.h: each kernel against the CPU reference), the CUDA
// test suite's own cases (tests/kernels/test_cuda_kernels.cpp: each kernel against its CPU twin;
// tests/nn/test_device_ops.cpp: each op forward and backward, and one training step of each
// model, against the CPU), and NCCL collectives over a world of one. Each check catches its own
// errors. The report's rows and outcomes: kernels/testing/report.h.
#pragma once
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/testing/report.h"

namespace engine::selftest {

using kernels::testing::Outcome;
using CheckResult = kernels::testing::ReportRow;

// The kernel-case table's cases that run on CUDA, on dev: one row each (group "case").
std::vector<CheckResult> run_table_cases(Device dev);
// The CUDA suite's test cases (GoogleTest, linked in from tests/) on dev, one result per case.
// Runs them once per process.
std::vector<CheckResult> run_test_cases(Device dev);
std::vector<CheckResult> run_nccl_checks(Device dev);

}  // namespace engine::selftest
