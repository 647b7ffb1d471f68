// apps/gpu_selftest/multi_rank.h: the collectives between ranks that gpu_selftest checks: two
// ranks as child processes of gpu_selftest itself (fork + exec, so the children start with a
// fresh CUDA context), meeting through a FileStore in a temporary folder, rank r on
// cuda:(r % devices). Each backend is one check: an all_reduce (SUM, then AVG) of float32 values
// unique to rank and position, compared with the sum computed on the host.
//   ring-staged  Communicator, CUDA tensors staged through pinned host memory and TCP/shm
//   ring-ipc     Communicator with the CUDA IPC ring (skipped, with the reason, when unsupported)
//   nccl         Communicator with NCCL attached
#pragma once
#include <string>
#include <vector>

#include "apps/gpu_selftest/checks.h"
#include "core/device.h"

namespace engine::selftest {

// A child's exit code for "cannot run here", and a check's outcome from its ranks' exit codes.
using kernels::testing::kSkipCode;
using kernels::testing::outcome_of;

// Runs every backend's check with 2 ranks; self is the path of this program (/proc/self/exe).
std::vector<CheckResult> run_multi_rank_checks(Device dev, const std::string& self);

// The child's side (gpu_selftest --child BACKEND RANK WORLD DIR): returns its exit code, 0 when
// the results are right; prints what went wrong to stderr.
int run_child(const std::string& backend, int rank, int world, const std::string& dir);

}  // namespace engine::selftest
