// comm/backends/nccl/nccl_backend.cpp: the NCCL backend - CUDA tensors on NCCL
// (comm/backends/nccl/nccl_group.h) for every collective NCCL has, on the device's comm stream;
// gather, scatter and calls mixing CPU and CUDA tensors staged through host memory.
#include "comm/backends/backend.h"
#include "comm/backends/nccl/nccl_group.h"

namespace engine::comm {

namespace {

bool on_cuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

class NcclBackend final : public FallbackBackend {
 public:
  explicit NcclBackend(std::unique_ptr<NcclGroup> nccl)
      : FallbackBackend(make_staged_backend()), nccl_(std::move(nccl)) {}
  const char* name() const override { return "nccl"; }

  void all_reduce(const CollContext& c, const Tensor& t, const cuda::Event* ready) override {
    if (ready) nccl_->order_next_after(*ready);
    nccl_->all_reduce(t, c.fp.redop);
  }
  void broadcast(const CollContext& c, const Tensor& t) override { nccl_->broadcast(t, c.fp.root); }
  void reduce(const CollContext& c, const Tensor& t) override {
    nccl_->reduce(t, c.fp.redop, c.fp.root);
  }
  void all_gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    if (!on_cuda(in) || !on_cuda(out)) return fallback_->all_gather(c, in, out);
    nccl_->all_gather(in, out);
  }
  void reduce_scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    if (!on_cuda(in) || !on_cuda(out)) return fallback_->reduce_scatter(c, in, out);
    nccl_->reduce_scatter(in, out, c.fp.redop);
  }
  bool send(const Tensor& t, int dst) override {
    nccl_->send(t, dst);
    return true;
  }
  bool recv(const Tensor& t, int src) override {
    nccl_->recv(t, src);
    return true;
  }
  bool queues_all_reduce() const override { return true; }
  cuda::Event all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready) override {
    return nccl_->all_reduce_queued(t, op, ready);
  }
  void check_queued() const override { nccl_->check(); }

 private:
  std::unique_ptr<NcclGroup> nccl_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(std::unique_ptr<NcclGroup>&& nccl, int rank, int world) {
  ENGINE_CHECK(nccl && nccl->rank() == rank && nccl->size() == world, "attach_nccl on rank ", rank,
               ": the NCCL group must span the same ranks");
  return std::make_unique<NcclBackend>(std::move(nccl));
}

}  // namespace engine::comm
