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
// comm_stream(d): NCCL collectives. Ordered against compute by events:
//   compute -> comm: comm_wait_for_compute(d) before a collective reads what compute wrote;
//   comm -> compute: compute_wait_for_comm(d) before compute reads what the collective wrote.
#pragma once
#include <cuda_runtime_api.h>

namespace engine::cuda {

cudaStream_t compute_stream(int device);
cudaStream_t comm_stream(int device);
// Host->device uploads that overlap compute (the trainer's next batch).
cudaStream_t copy_stream(int device);

// Makes `waiter` wait (on the device, not the host) for all work queued so far on `signaller`.
void stream_wait(int device, cudaStream_t waiter, cudaStream_t signaller);
inline void comm_wait_for_compute(int device) {
  stream_wait(device, comm_stream(device), compute_stream(device));
}
inline void compute_wait_for_comm(int device) {
  stream_wait(device, compute_stream(device), comm_stream(device));
}

// Blocks the host until the device's compute stream has finished its queued work.
void synchronize_compute(int device);

}  // namespace engine::cuda
