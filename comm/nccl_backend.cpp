// comm/nccl_backend.cpp: the NCCL backend - CUDA tensors on NCCL (comm/nccl_communicator.h) for
// every collective NCCL has, on the device's comm stream; gather, scatter and calls mixing CPU and
// CUDA tensors staged through host memory.
#include "comm/backend.h"
#include "comm/nccl_communicator.h"

namespace engine::comm {

namespace {

bool on_cuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

class NcclBackend final : public FallbackBackend {
 public:
  explicit NcclBackend(std::unique_ptr<NcclCommunicator> nccl)
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

 private:
  std::unique_ptr<NcclCommunicator> nccl_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(std::unique_ptr<NcclCommunicator> nccl) {
  return std::make_unique<NcclBackend>(std::move(nccl));
}

}  // namespace engine::comm
