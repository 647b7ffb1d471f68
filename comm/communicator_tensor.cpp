// comm/communicator_tensor.cpp: the Communicator's Tensor overloads. A CPU tensor goes straight to
// the raw-buffer call; a CUDA tensor takes one of three paths (communicator.h): NCCL, the CUDA IPC
// ring, or staging through pinned host memory around the raw-buffer call.
#include <algorithm>

#include "comm/communicator.h"
#include "comm/cuda_ipc_ring.h"
#include "comm/nccl_communicator.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::comm {

// One tensor of a staged collective: downloaded before it (in), uploaded after it (out).
struct Communicator::Staged {
  Tensor t;  // undefined: no buffer on this rank (gather off root, ...)
  bool in = false, out = false;
  void* host = nullptr;  // where the collective sees it
};

namespace {

size_t numel(const Tensor& t) {
  return static_cast<size_t>(t.numel());
}

void check_defined(const Tensor& t, const char* what) {
  ENGINE_CHECK(t.defined(), "comm ", what, ": undefined tensor");
}

bool on_cuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

size_t round_up(size_t n, size_t q) {
  return (n + q - 1) / q * q;
}

}  // namespace

Communicator::~Communicator() {
  shutdown();
  // NCCL and IPC resources go before the staging buffer; none of them throws.
  nccl_.reset();
  ipc_.reset();
  if (pinned_) {
    try {
      cuda::free_pinned(pinned_);
    } catch (const std::exception&) {
      // at exit the driver may be gone first
    }
  }
}

void Communicator::attach_nccl(std::unique_ptr<NcclCommunicator> nccl) {
  ENGINE_CHECK(nccl && nccl->rank() == rank() && nccl->size() == size(), "attach_nccl on rank ",
               rank(), ": the NCCL communicator must span the same ranks");
  nccl_ = std::move(nccl);
}

void Communicator::attach_ipc_ring(std::unique_ptr<CudaIpcRing> ring) {
  ENGINE_CHECK(ring && ring->rank() == rank() && ring->size() == size(), "attach_ipc_ring on rank ",
               rank(), ": the IPC ring must span the same ranks");
  ipc_ = std::move(ring);
}

std::string Communicator::cuda_path() const {
  if (nccl_) return "nccl";
  if (ipc_) return "ipc";
  return "staged";
}

// Inside run(): the staging buffer is used by one collective at a time, in call order, on
// whichever thread executes it; the nested raw-buffer calls of fn run inline.
void Communicator::run_staged(std::vector<Staged>& ts, const cuda::Event* ready,
                              const std::function<void()>& fn) {
  int dev = -1;
  size_t total = 0;
  for (const Staged& s : ts) {
    if (!on_cuda(s.t)) continue;
    ENGINE_CHECK(dev < 0 || dev == s.t.device().index, "comm on rank ", rank(),
                 ": one collective's CUDA tensors must share a device (cuda:", dev, " and ",
                 s.t.device().str(), ")");
    dev = s.t.device().index;
    total += round_up(s.t.nbytes(), 64);
  }
  if (dev < 0) {  // all on the CPU: the raw-buffer call as it is
    for (Staged& s : ts) s.host = s.t.defined() ? s.t.raw_data() : nullptr;
    fn();
    return;
  }
  run([&] {
    if (pinned_bytes_ < total) {
      cuda::free_pinned(pinned_);
      pinned_ = nullptr;
      pinned_bytes_ = 0;
      pinned_ = cuda::alloc_pinned(total);
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
    // Device -> host on the comm stream, once the tensors are written.
    cuda::comm_after(dev, ready);
    for (Staged& s : ts)
      if (on_cuda(s.t) && s.in)
        cuda::copy_async(s.host, Device::cpu(), s.t.raw_data(), s.t.device(), s.t.nbytes(), dev,
                         cuda::Stream::Comm);
    cuda::synchronize(dev, cuda::Stream::Comm);
    fn();
    bool uploaded = false;
    for (Staged& s : ts)
      if (on_cuda(s.t) && s.out) {
        cuda::copy_async(s.t.raw_data(), s.t.device(), s.host, Device::cpu(), s.t.nbytes(), dev,
                         cuda::Stream::Comm);
        uploaded = true;
      }
    if (uploaded) {
      cuda::Event::record(dev, cuda::Stream::Comm).block(cuda::Stream::Compute);
      cuda::synchronize(dev, cuda::Stream::Comm);  // the pinned buffer is free again
    }
  });
}

void Communicator::cuda_all_reduce(const Tensor& t, ReduceOp op, const cuda::Event* ready) {
  check_reduce_supported(t.dtype(), op);
  if (nccl_) {
    run([&] {
      if (ready) nccl_->order_next_after(*ready);
      nccl_->all_reduce(t, op);
    });
    return;
  }
  if (ipc_ && t.dtype() == DType::F32) {
    run([&] {
      // The kernel cannot see a peer that calls something else: the ranks first agree on the
      // call over the host transports (a few microseconds over shared memory).
      if (size() > 1) agree(begin(CollOp::AllReduce, numel(t), t.dtype(), op, -1));
      ipc_->all_reduce(t, op, ready);
    });
    return;
  }
  std::vector<Staged> ts{{t, true, true}};
  run_staged(ts, ready, [&] { all_reduce(ts[0].host, numel(t), t.dtype(), op); });
}

void Communicator::all_reduce(const Tensor& t, ReduceOp op) {
  check_defined(t, "all_reduce");
  if (on_cuda(t)) return cuda_all_reduce(t, op, nullptr);
  all_reduce(t.raw_data(), numel(t), t.dtype(), op);
}

void Communicator::all_reduce_after(const Tensor& t, ReduceOp op, const cuda::Event& ready) {
  check_defined(t, "all_reduce");
  ENGINE_CHECK(on_cuda(t) && ready.device() == t.device().index, "all_reduce_after: tensor on ",
               t.device().str(), ", event of cuda:", ready.device());
  cuda_all_reduce(t, op, &ready);
}

void Communicator::broadcast(const Tensor& t, int root) {
  check_defined(t, "broadcast");
  if (on_cuda(t) && nccl_) return run([&] { nccl_->broadcast(t, root); });
  std::vector<Staged> ts{{t, true, true}};
  run_staged(ts, nullptr, [&] { broadcast(ts[0].host, numel(t), t.dtype(), root); });
}

void Communicator::reduce(const Tensor& t, ReduceOp op, int root) {
  check_defined(t, "reduce");
  if (on_cuda(t) && nccl_) return run([&] { nccl_->reduce(t, op, root); });
  std::vector<Staged> ts{{t, true, true}};
  run_staged(ts, nullptr, [&] { reduce(ts[0].host, numel(t), t.dtype(), op, root); });
}

void Communicator::all_gather(const Tensor& in, const Tensor& out) {
  check_defined(in, "all_gather");
  check_defined(out, "all_gather");
  ENGINE_CHECK(out.dtype() == in.dtype(), "all_gather: output dtype ", dtype_name(out.dtype()),
               " differs from input dtype ", dtype_name(in.dtype()));
  ENGINE_CHECK(numel(out) == numel(in) * size(), "all_gather: output has ", numel(out),
               " elements, expected ", size(), " x ", numel(in));
  if (on_cuda(in) && on_cuda(out) && nccl_) return run([&] { nccl_->all_gather(in, out); });
  std::vector<Staged> ts{{in, true, false}, {out, false, true}};
  run_staged(ts, nullptr, [&] { all_gather(ts[0].host, ts[1].host, numel(in), in.dtype()); });
}

void Communicator::gather(const Tensor& in, const Tensor& out, int root) {
  check_defined(in, "gather");
  if (rank() == root) {
    check_defined(out, "gather");
    ENGINE_CHECK(out.dtype() == in.dtype() && numel(out) == numel(in) * size(),
                 "gather: the root's output must hold ", size(), " x ", numel(in), " ",
                 dtype_name(in.dtype()));
  }
  std::vector<Staged> ts{{in, true, false}, {rank() == root ? out : Tensor(), false, true}};
  run_staged(ts, nullptr, [&] { gather(ts[0].host, ts[1].host, numel(in), in.dtype(), root); });
}

void Communicator::scatter(const Tensor& in, const Tensor& out, int root) {
  check_defined(out, "scatter");
  if (rank() == root) {
    check_defined(in, "scatter");
    ENGINE_CHECK(in.dtype() == out.dtype() && numel(in) == numel(out) * size(),
                 "scatter: the root's input must hold ", size(), " x ", numel(out), " ",
                 dtype_name(out.dtype()));
  }
  std::vector<Staged> ts{{rank() == root ? in : Tensor(), true, false}, {out, false, true}};
  run_staged(ts, nullptr, [&] { scatter(ts[0].host, ts[1].host, numel(out), out.dtype(), root); });
}

void Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_defined(in, "reduce_scatter");
  check_defined(out, "reduce_scatter");
  ENGINE_CHECK(in.dtype() == out.dtype() && numel(in) == numel(out) * size(),
               "reduce_scatter: input must hold ", size(), " x ", numel(out), " ",
               dtype_name(out.dtype()));
  if (on_cuda(in) && on_cuda(out) && nccl_) return run([&] { nccl_->reduce_scatter(in, out, op); });
  std::vector<Staged> ts{{in, true, false}, {out, false, true}};
  run_staged(ts, nullptr,
             [&] { reduce_scatter(ts[0].host, ts[1].host, numel(out), out.dtype(), op); });
}

// Point to point: a CUDA tensor is staged around the blocking call (NCCL's send/recv when
// attached). Messages are matched per pair in order, so the staging needs no collective order.
void Communicator::send(const Tensor& t, int dst, int tag) {
  check_defined(t, "send");
  if (!on_cuda(t)) return send(t.raw_data(), numel(t), t.dtype(), dst, tag);
  if (nccl_) return nccl_->send(t, dst);
  Tensor h = t.to(Device::cpu());
  send(h.raw_data(), numel(h), h.dtype(), dst, tag);
}

void Communicator::recv(const Tensor& t, int src, int tag) {
  check_defined(t, "recv");
  if (!on_cuda(t)) return recv(t.raw_data(), numel(t), t.dtype(), src, tag);
  if (nccl_) return nccl_->recv(t, src);
  Tensor h = Tensor::empty(t.shape(), t.dtype(), Device::cpu());
  recv(h.raw_data(), numel(h), h.dtype(), src, tag);
  Tensor(t).copy_from(h);
}

namespace {
void* cpu_only(const Tensor& t, const char* what) {
  check_defined(t, what);
  ENGINE_CHECK(t.device().is_cpu(), "comm ", what, ": tensor on ", t.device().str(),
               ": non-blocking point-to-point takes CPU tensors; use send/recv for CUDA tensors");
  return t.raw_data();
}
}  // namespace

Work Communicator::isend(const Tensor& t, int dst, int tag) {
  return isend(cpu_only(t, "isend"), numel(t), t.dtype(), dst, tag);
}

Work Communicator::irecv(const Tensor& t, int src, int tag) {
  return irecv(cpu_only(t, "irecv"), numel(t), t.dtype(), src, tag);
}

Work Communicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_defined(t, "all_reduce_async");
  check_reduce_supported(t.dtype(), op);
  // The closure holds the tensor so that its storage outlives the queued work.
  if (on_cuda(t)) return enqueue([=, this] { cuda_all_reduce(t, op, nullptr); });
  void* p = t.raw_data();
  return enqueue([=, this] { do_all_reduce(p, numel(t), t.dtype(), op); });
}

Work Communicator::broadcast_async(const Tensor& t, int root) {
  check_defined(t, "broadcast_async");
  check_root(root, "broadcast");
  if (on_cuda(t)) return enqueue([=, this] { broadcast(t, root); });
  void* p = t.raw_data();
  return enqueue([=, this] { do_broadcast(p, numel(t), t.dtype(), root); });
}

}  // namespace engine::comm
