// comm/backends/cuda_ipc/ipc_backend.cpp: the CUDA IPC ring backend - float32 all_reduce of CUDA
// tensors on our own kernels between the GPUs of one host (comm/backends/cuda_ipc/cuda_ipc_ring.h);
// every other collective, and other dtypes, staged through host memory.
#include "comm/backends/backend.h"
#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"

namespace engine::comm {

namespace {

class IpcBackend final : public FallbackBackend {
 public:
  explicit IpcBackend(std::unique_ptr<CudaIpcRing> ring)
      : FallbackBackend(make_staged_backend()), ring_(std::move(ring)) {}
  const char* name() const override { return "ipc"; }

  void all_reduce(const CollContext& c, const Tensor& t, const cuda::Event* ready) override {
    if (t.dtype() != DType::F32) return fallback_->all_reduce(c, t, ready);
    // No agreement over the host transports first: the ring checks that every rank makes the
    // same call itself (the protocols' call words, the event chain's shared counters).
    ring_->all_reduce(t, c.fp.redop, ready);
  }

  // The ring queues (GradSync overlaps it with backward, as NCCL's); one rank has nothing to.
  bool queues_all_reduce() const override { return ring_->stream_ordered(); }
  cuda::Event all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready) override {
    if (t.dtype() != DType::F32)
      ENGINE_FAIL("the ipc backend queues float32 all_reduce only, not ", dtype_name(t.dtype()));
    return ring_->all_reduce_queued(t, op, ready);
  }
  void check_queued() const override { ring_->check(); }

 private:
  std::unique_ptr<CudaIpcRing> ring_;
};

}  // namespace

std::unique_ptr<Backend> make_ipc_backend(std::unique_ptr<CudaIpcRing>&& ring, int rank,
                                          int world) {
  ENGINE_CHECK(ring && ring->rank() == rank && ring->size() == world, "attach_ipc_ring on rank ",
               rank, ": the IPC ring must span the same ranks");
  return std::make_unique<IpcBackend>(std::move(ring));
}

}  // namespace engine::comm
