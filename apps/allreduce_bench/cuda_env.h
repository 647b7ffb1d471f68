// apps/allreduce_bench/cuda_env.h: owns allreduce_bench's few direct CUDA needs: finding out,
// without initialising CUDA in this process, whether devices answer (CUDA does not survive fork,
// and the ranks are forked after the check); waiting for a device; naming it and NCCL's version.
// In a build without CUDA the probe reports no device and the rest throws engine::Error.
#pragma once
#include <string>

namespace engine::allreduce_bench {

struct CudaProbe {
  int count = 0;       // CUDA devices that answer
  std::string reason;  // "no CUDA device: ..." when count is 0
};

// Asks a short-lived child process (engine::cuda_device_count()), so that this process can still
// fork ranks that use CUDA. Throws engine::Error when it cannot fork.
CudaProbe probe_cuda_devices();

// Blocks the host until every stream of `device` has finished its queued work.
void device_synchronize(int device);

// "NVIDIA H100 80GB HBM3" for cuda:device.
std::string device_name(int device);

// "2.28.3": the NCCL library this process runs with.
std::string nccl_version();

}  // namespace engine::allreduce_bench
