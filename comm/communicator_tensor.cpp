// comm/communicator_tensor.cpp: the Communicator's Tensor overloads. Each checks its tensors, then
// hands the call to the backend of their device (comm/backends/backend.h): host for CPU tensors,
// and for CUDA tensors the one attached (nccl, ipc) or staged through pinned host memory.
#include "comm/communicator.h"
#include "core/error.h"

namespace engine::comm {

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

// in holds size() x out's elements (reduce_scatter; gather and scatter at the root).
void check_parts(const Tensor& whole, const Tensor& part, int world, const char* what) {
  ENGINE_CHECK(whole.dtype() == part.dtype() && numel(whole) == numel(part) * world, what,
               " must hold ", world, " x ", numel(part), " ", dtype_name(part.dtype()));
}

}  // namespace

Communicator::~Communicator() {
  shutdown();
  // The CUDA backend (NCCL, IPC resources, the staging buffer) goes first; none of them throws.
  cuda_.reset();
}

void Communicator::set_backend(DeviceKind kind, std::unique_ptr<Backend> backend) {
  ENGINE_CHECK(backend, "set_backend on rank ", rank(), ": no backend");
  if (kind == DeviceKind::CPU) {
    host_ = std::move(backend);
    return;
  }
  cuda_ = std::move(backend);
}

// The backends check that the group spans these ranks (they know its class; this facade does not).
void Communicator::attach_nccl(std::unique_ptr<NcclGroup> nccl) {
  set_backend(DeviceKind::CUDA, make_nccl_backend(std::move(nccl), rank(), size()));
}

void Communicator::attach_ipc_ring(std::unique_ptr<CudaIpcRing> ring) {
  set_backend(DeviceKind::CUDA, make_ipc_backend(std::move(ring), rank(), size()));
}

Backend& Communicator::backend_for(const Tensor& a, const Tensor& b) const {
  return on_cuda(a) || on_cuda(b) ? *cuda_ : *host_;
}

void Communicator::all_reduce(const Tensor& t, ReduceOp op) {
  check_defined(t, "all_reduce");
  check_reduce_supported(t.dtype(), op);
  if (!on_cuda(t) && uses_two_level()) return all_reduce(t.raw_data(), numel(t), t.dtype(), op);
  Backend& b = backend_for(t);
  run([&] { b.all_reduce(call(CollOp::AllReduce, numel(t), t.dtype(), op, -1), t, nullptr); });
}

void Communicator::all_reduce_after(const Tensor& t, ReduceOp op, const cuda::Event& ready) {
  check_defined(t, "all_reduce");
  ENGINE_CHECK(on_cuda(t) && ready.device() == t.device().index, "all_reduce_after: tensor on ",
               t.device().str(), ", event of cuda:", ready.device());
  check_reduce_supported(t.dtype(), op);
  run([&] { cuda_->all_reduce(call(CollOp::AllReduce, numel(t), t.dtype(), op, -1), t, &ready); });
}

cuda::Event Communicator::all_reduce_queued(const Tensor& t, ReduceOp op,
                                            const cuda::Event& ready) {
  check_defined(t, "all_reduce_queued");
  ENGINE_CHECK(on_cuda(t) && ready.device() == t.device().index, "all_reduce_queued: tensor on ",
               t.device().str(), ", event of cuda:", ready.device());
  return cuda_->all_reduce_queued(t, op, ready);
}

void Communicator::broadcast(const Tensor& t, int root) {
  check_defined(t, "broadcast");
  check_root(root, "broadcast");
  Backend& b = backend_for(t);
  run([&] { b.broadcast(call(CollOp::Broadcast, numel(t), t.dtype(), ReduceOp::Sum, root), t); });
}

void Communicator::reduce(const Tensor& t, ReduceOp op, int root) {
  check_defined(t, "reduce");
  check_root(root, "reduce");
  check_reduce_supported(t.dtype(), op);
  Backend& b = backend_for(t);
  run([&] { b.reduce(call(CollOp::Reduce, numel(t), t.dtype(), op, root), t); });
}

void Communicator::all_gather(const Tensor& in, const Tensor& out) {
  check_defined(in, "all_gather");
  check_defined(out, "all_gather");
  ENGINE_CHECK(out.dtype() == in.dtype(), "all_gather: output dtype ", dtype_name(out.dtype()),
               " differs from input dtype ", dtype_name(in.dtype()));
  ENGINE_CHECK(numel(out) == numel(in) * size(), "all_gather: output has ", numel(out),
               " elements, expected ", size(), " x ", numel(in));
  Backend& b = backend_for(in, out);
  run([&] {
    b.all_gather(call(CollOp::AllGather, numel(in), in.dtype(), ReduceOp::Sum, -1), in, out);
  });
}

void Communicator::gather(const Tensor& in, const Tensor& out_, int root) {
  check_defined(in, "gather");
  check_root(root, "gather");
  const Tensor out = rank() == root ? out_ : Tensor();
  if (rank() == root) {
    check_defined(out, "gather");
    check_parts(out, in, size(), "gather: the root's output");
  }
  Backend& b = backend_for(in, out);
  run([&] { b.gather(call(CollOp::Gather, numel(in), in.dtype(), ReduceOp::Sum, root), in, out); });
}

void Communicator::scatter(const Tensor& in_, const Tensor& out, int root) {
  check_defined(out, "scatter");
  check_root(root, "scatter");
  const Tensor in = rank() == root ? in_ : Tensor();
  if (rank() == root) {
    check_defined(in, "scatter");
    check_parts(in, out, size(), "scatter: the root's input");
  }
  Backend& b = backend_for(in, out);
  run([&] {
    b.scatter(call(CollOp::Scatter, numel(out), out.dtype(), ReduceOp::Sum, root), in, out);
  });
}

void Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_defined(in, "reduce_scatter");
  check_defined(out, "reduce_scatter");
  check_parts(in, out, size(), "reduce_scatter: input");
  check_reduce_supported(out.dtype(), op);
  Backend& b = backend_for(in, out);
  run([&] {
    b.reduce_scatter(call(CollOp::ReduceScatter, numel(out), out.dtype(), op, -1), in, out);
  });
}

// Point to point: a CUDA tensor goes to the CUDA backend's own (NCCL) or is staged around the
// blocking call. Messages are matched per pair in order, so the staging needs no collective order.
// NCCL's send and recv do: NCCL hangs when ranks issue its calls in different orders, so they run
// through run(), after the collectives queued before them (an all_reduce_async in flight), as
// every collective does.
void Communicator::send(const Tensor& t, int dst, int tag) {
  check_defined(t, "send");
  if (!on_cuda(t)) return send(t.raw_data(), numel(t), t.dtype(), dst, tag);
  bool sent = false;
  run([&] { sent = cuda_->send(t, dst); });
  if (sent) return;
  Tensor h = t.to(Device::cpu());
  send(h.raw_data(), numel(h), h.dtype(), dst, tag);
}

void Communicator::recv(const Tensor& t, int src, int tag) {
  check_defined(t, "recv");
  if (!on_cuda(t)) return recv(t.raw_data(), numel(t), t.dtype(), src, tag);
  bool received = false;
  run([&] { received = cuda_->recv(t, src); });
  if (received) return;
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

// The closures hold the tensor so that its storage outlives the queued work.
Work Communicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_defined(t, "all_reduce_async");
  check_reduce_supported(t.dtype(), op);
  if (!on_cuda(t) && uses_two_level())
    return enqueue([=, this] {
      host_all_reduce(call(CollOp::AllReduce, numel(t), t.dtype(), op, -1), t.raw_data());
    });
  Backend* b = &backend_for(t);
  return enqueue([=, this] {
    b->all_reduce(call(CollOp::AllReduce, numel(t), t.dtype(), op, -1), t, nullptr);
  });
}

Work Communicator::broadcast_async(const Tensor& t, int root) {
  check_defined(t, "broadcast_async");
  check_root(root, "broadcast");
  Backend* b = &backend_for(t);
  return enqueue([=, this] {
    b->broadcast(call(CollOp::Broadcast, numel(t), t.dtype(), ReduceOp::Sum, root), t);
  });
}

}  // namespace engine::comm
