// core/cuda/stream.cuh: the streams of each device, created lazily, never destroyed (at exit the
// driver may be gone first).
//
// compute_stream(d): every kernel, cuBLAS and cuDNN call and every copy of core (core/cuda/copy.cu)
//   on device d runs here, in order. The caching allocator reuses a freed block without events
//   because of that one order. It is a blocking stream, so work a library queues on the legacy
//   default stream is ordered with it too. Comm and copy streams are non-blocking: only events
//   order them, and work on them must be waited for (by compute or the host) before its buffers
//   are freed.
// copy_stream(d): uploads of the next batch while the current one computes.
// comm_stream(d): collectives (NCCL, the IPC ring, staging copies). Ordered against compute by
//   events (cuda::Event, cuda::comm_after in core/cuda_backend.h).
#pragma once
#include <cuda_runtime_api.h>

namespace engine::cuda {

cudaStream_t compute_stream(int device);
cudaStream_t comm_stream(int device);
// Host->device uploads that overlap compute (the trainer's next batch).
cudaStream_t copy_stream(int device);

}  // namespace engine::cuda
