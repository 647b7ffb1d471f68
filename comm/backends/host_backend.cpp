// comm/backends/host_backend.cpp: the host backend - CPU tensors straight to the ring, chain and
// direct algorithms (comm/algorithms/algorithms.h, run_algorithm).
#include "comm/backends/backend.h"

namespace engine::comm {

namespace {

void* ptr(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

class HostBackend final : public Backend {
 public:
  const char* name() const override { return "host"; }
  void all_reduce(const CollContext& c, const Tensor& t, const cuda::Event*) override {
    run_algorithm(c, nullptr, ptr(t));
  }
  void broadcast(const CollContext& c, const Tensor& t) override {
    run_algorithm(c, nullptr, ptr(t));
  }
  void reduce(const CollContext& c, const Tensor& t) override { run_algorithm(c, nullptr, ptr(t)); }
  void all_gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    run_algorithm(c, ptr(in), ptr(out));
  }
  void gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    run_algorithm(c, ptr(in), ptr(out));
  }
  void scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    run_algorithm(c, ptr(in), ptr(out));
  }
  void reduce_scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    run_algorithm(c, ptr(in), ptr(out));
  }
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() {
  return std::make_unique<HostBackend>();
}

}  // namespace engine::comm
