// comm/backends/staged/staged_backend.cpp: the staged backend - a collective on CUDA tensors
// copied, on the comm stream after the compute work queued so far (or after `ready`), into this
// backend's pinned host buffer; the host algorithms (comm/algorithms/algorithms.h) run there and
// the results are copied back, the compute stream waiting for that copy. CPU tensors of the same
// call are used in place.
#include <memory>
#include <vector>

#include "comm/backends/backend.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::comm {

namespace {

// One tensor of a staged collective: downloaded before it (in), uploaded after it (out).
struct Staged {
  Tensor t;  // undefined: no buffer on this rank (gather off root, ...)
  bool in = false, out = false;
  void* host = nullptr;  // where the collective sees it
};

bool on_cuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

size_t round_up(size_t n, size_t q) {
  return (n + q - 1) / q * q;
}

class StagedBackend final : public Backend {
 public:
  ~StagedBackend() override {
    try {
      cuda::free_pinned(pinned_, pinned_device_);
    } catch (const std::exception&) {
      // at exit the driver may be gone first
    }
  }
  const char* name() const override { return "staged"; }

  void all_reduce(const CollContext& c, const Tensor& t, const cuda::Event* ready) override {
    stage(c, {{t, true, true}}, ready);
  }
  void broadcast(const CollContext& c, const Tensor& t) override {
    stage(c, {{t, true, true}}, nullptr);
  }
  void reduce(const CollContext& c, const Tensor& t) override {
    stage(c, {{t, true, true}}, nullptr);
  }
  void all_gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    stage(c, {{in, true, false}, {out, false, true}}, nullptr);
  }
  void gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    stage(c, {{in, true, false}, {out, false, true}}, nullptr);
  }
  void scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    stage(c, {{in, true, false}, {out, false, true}}, nullptr);
  }
  void reduce_scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    stage(c, {{in, true, false}, {out, false, true}}, nullptr);
  }

 private:
  // Runs c's host algorithm on the staged copies: ts is {in, out}, or {buffer} for the in-place
  // collectives.
  void stage(const CollContext& c, std::vector<Staged> ts, const cuda::Event* ready);
  // The one CUDA device of the call's tensors (-1: all on the CPU) and their staged bytes.
  static int device_of(const CollContext& c, const std::vector<Staged>& ts, size_t* total);
  void place(std::vector<Staged>& ts, size_t total, int dev);
  static void download(std::vector<Staged>& ts, int dev, const cuda::Event* ready);
  static void upload(std::vector<Staged>& ts, int dev);

  void* pinned_ = nullptr;  // staging buffer (pinned host memory), grown on demand
  size_t pinned_bytes_ = 0;
  int pinned_device_ = -1;  // whose context allocated it
};

// The staging buffer is used by one collective at a time: the Communicator runs them in order.
void StagedBackend::stage(const CollContext& c, std::vector<Staged> ts, const cuda::Event* ready) {
  size_t total = 0;
  const int dev = device_of(c, ts, &total);
  place(ts, total, dev);
  if (dev >= 0) download(ts, dev, ready);
  run_algorithm(c, ts.front().host, ts.back().host);
  if (dev >= 0) upload(ts, dev);
}

int StagedBackend::device_of(const CollContext& c, const std::vector<Staged>& ts, size_t* total) {
  int dev = -1;
  for (const Staged& s : ts) {
    if (!on_cuda(s.t)) continue;
    ENGINE_CHECK(dev < 0 || dev == s.t.device().index, "comm on rank ", c.rank(),
                 ": one collective's CUDA tensors must share a device (cuda:", dev, " and ",
                 s.t.device().str(), ")");
    dev = s.t.device().index;
    *total += round_up(s.t.nbytes(), 64);
  }
  return dev;
}

// The buffer is allocated in the context of the call's device (dev >= 0 whenever total > 0).
void StagedBackend::place(std::vector<Staged>& ts, size_t total, int dev) {
  if (total > pinned_bytes_) {
    cuda::free_pinned(pinned_, pinned_device_);
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    pinned_ = cuda::alloc_pinned(total, dev);
    pinned_device_ = dev;
    pinned_bytes_ = total;
  }
  char* p = static_cast<char*>(pinned_);
  for (Staged& s : ts) {
    if (!on_cuda(s.t)) {
      s.host = s.t.defined() ? s.t.raw_data() : nullptr;
      continue;
    }
    s.host = p;
    p += round_up(s.t.nbytes(), 64);
  }
}

// Device -> host on the comm stream, once the tensors are written.
void StagedBackend::download(std::vector<Staged>& ts, int dev, const cuda::Event* ready) {
  cuda::comm_after(dev, ready);
  for (Staged& s : ts)
    if (on_cuda(s.t) && s.in)
      cuda::copy_async(s.host, Device::cpu(), s.t.raw_data(), s.t.device(), s.t.nbytes(), dev,
                       cuda::Stream::Comm);
  cuda::synchronize(dev, cuda::Stream::Comm);
}

// Host -> device on the comm stream; compute waits for it, and the host too (the pinned buffer is
// free again when this returns).
void StagedBackend::upload(std::vector<Staged>& ts, int dev) {
  bool uploaded = false;
  for (Staged& s : ts)
    if (on_cuda(s.t) && s.out) {
      cuda::copy_async(s.t.raw_data(), s.t.device(), s.host, Device::cpu(), s.t.nbytes(), dev,
                       cuda::Stream::Comm);
      uploaded = true;
    }
  if (!uploaded) return;
  cuda::Event::record(dev, cuda::Stream::Comm).block(cuda::Stream::Compute);
  cuda::synchronize(dev, cuda::Stream::Comm);
}

}  // namespace

std::unique_ptr<Backend> make_staged_backend() {
  return std::make_unique<StagedBackend>();
}

}  // namespace engine::comm
