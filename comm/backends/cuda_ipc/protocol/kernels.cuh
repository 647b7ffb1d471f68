// comm/backends/cuda_ipc/protocol/kernels.cuh: the stream-ordered IPC ring's kernels, the
// protocols of ll.h and simple.h over the GPU's memory operations (gpu_mem_ops.cuh). One launch is
// one whole all_reduce; nothing waits on the host.
//   LL:     kLlBlocks blocks of kThreads, every thread owning elements of each round; block 0
//           announces the call words.
//   Simple: one block per channel (g.channels), channel 0 announces.
#pragma once

#include "comm/backends/cuda_ipc/protocol/gpu_mem_ops.cuh"
#include "comm/backends/cuda_ipc/protocol/ll.h"
#include "comm/backends/cuda_ipc/protocol/simple.h"

namespace engine::comm::ipc::proto {

constexpr int kThreads = 512;
constexpr int kLlBlocks = 2;

#if defined(__CUDACC__)

template <class Op>
__global__ void __launch_bounds__(kThreads) ll_kernel(const CallArgs a, const Op op) {
  const GpuMemOps ops;
  (void)ll_all_reduce(ops, a, op, blockIdx.x == 0);
}

template <class Op>
__global__ void __launch_bounds__(kThreads) simple_kernel(const CallArgs a, const Op op) {
  const GpuMemOps ops;
  (void)simple_channel(ops, a, op, static_cast<int>(blockIdx.x));
}

#endif  // __CUDACC__

}  // namespace engine::comm::ipc::proto
