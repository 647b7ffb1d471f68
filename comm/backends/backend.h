// comm/backends/backend.h: the one interface every way of moving a collective's tensors implements.
// The Communicator (comm/communicator.h) numbers each call, checks its arguments, makes its context
// (comm/algorithms/algorithms.h: fingerprint, host transport, timeout) and hands it to the backend
// chosen for the tensors' device, on its executing thread, in call order:
//
//   host    CPU tensors: the ring, chain and direct algorithms over the host transports
//           (host_backend.cpp)
//   staged  CUDA tensors through a pinned host buffer around the host algorithms (the default for
//           CUDA; staged/staged_backend.cpp)
//   ipc     float32 all_reduce on the CUDA IPC ring, the rest staged (cuda_ipc/ipc_backend.cpp)
//   nccl    NCCL for what it has, gather and scatter staged (nccl/nccl_backend.cpp)
//   mpi     every collective on MPI, CPU and CUDA tensors (staged) and raw host buffers
//           (comm/backends/mpi/mpi_backend.h)
//
// A new backend is one file (a class deriving from Backend, or from FallbackBackend to override
// only what it does itself, and its make_*_backend) and one registration: its make_* declared below
// and handed to Communicator::set_backend for the device kind it serves (see attach_nccl). Every
// call returns with the result in place. One virtual call per collective; what a backend does per
// segment is its own.
#pragma once
#include <memory>

#include "comm/algorithms/algorithms.h"
#include "comm/base/reduce.h"
#include "core/cuda_backend.h"
#include "core/error.h"
#include "core/tensor.h"

namespace engine::comm {

class Backend {
 public:
  virtual ~Backend() = default;
  // "host", "staged", "ipc", "nccl" (Communicator::cuda_path()).
  virtual const char* name() const = 0;

  // c.fp describes the call (count: elements per rank, as in comm/communicator.h). `ready`: an
  // event of t's device the call waits for on the device instead of all queued compute work.
  virtual void all_reduce(const CollContext& c, const Tensor& t, const cuda::Event* ready) = 0;
  virtual void broadcast(const CollContext& c, const Tensor& t) = 0;
  virtual void reduce(const CollContext& c, const Tensor& t) = 0;
  virtual void all_gather(const CollContext& c, const Tensor& in, const Tensor& out) = 0;
  // out undefined off root (gather), in undefined off root (scatter).
  virtual void gather(const CollContext& c, const Tensor& in, const Tensor& out) = 0;
  virtual void scatter(const CollContext& c, const Tensor& in, const Tensor& out) = 0;
  virtual void reduce_scatter(const CollContext& c, const Tensor& in, const Tensor& out) = 0;

  // A collective on raw host buffers (the Communicator's pointer overloads, barrier included):
  // in and out as run_algorithm's. The host algorithms, unless the backend has its own (mpi).
  virtual void host_buffers(const CollContext& c, const void* in, void* out) {
    run_algorithm(c, in, out);
  }

  // Point to point on device memory, for a backend with its own (NCCL): true when done. false:
  // the Communicator stages the tensor through host memory over its own point-to-point stream.
  virtual bool send(const Tensor& t, int dst) { return false; }
  virtual bool recv(const Tensor& t, int src) { return false; }

  // --- queued on the device, no host wait (gradient sync) ---
  // True for a backend that can queue an all_reduce on its own stream and return at once (nccl).
  // The others finish every collective before returning: their callers wait on a thread instead.
  virtual bool queues_all_reduce() const { return false; }
  // Queues an all_reduce of the CUDA tensor t on the backend's stream after `ready` (an event of
  // t's device) and returns at once with an event recorded after it: the caller makes its compute
  // stream wait on that event. The backend bounds it (a watchdog); a failure shows at the next
  // call or at check_queued(). Only where queues_all_reduce().
  virtual cuda::Event all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready) {
    ENGINE_FAIL("the ", name(), " backend cannot queue an all_reduce without a host wait");
  }
  // Throws the error of a queued all_reduce that failed, if any (nothing where none is queued).
  virtual void check_queued() const {}
};

// A backend that does some collectives itself and hands the others to `fallback` (the staged
// backend for the CUDA ones).
class FallbackBackend : public Backend {
 public:
  explicit FallbackBackend(std::unique_ptr<Backend> fallback) : fallback_(std::move(fallback)) {}
  void all_reduce(const CollContext& c, const Tensor& t, const cuda::Event* ready) override {
    fallback_->all_reduce(c, t, ready);
  }
  void broadcast(const CollContext& c, const Tensor& t) override { fallback_->broadcast(c, t); }
  void reduce(const CollContext& c, const Tensor& t) override { fallback_->reduce(c, t); }
  void all_gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    fallback_->all_gather(c, in, out);
  }
  void gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    fallback_->gather(c, in, out);
  }
  void scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    fallback_->scatter(c, in, out);
  }
  void reduce_scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    fallback_->reduce_scatter(c, in, out);
  }

 protected:
  std::unique_ptr<Backend> fallback_;
};

class CudaIpcRing;
class NcclGroup;

// The host algorithms on CPU tensors (host_backend.cpp).
std::unique_ptr<Backend> make_host_backend();
// CUDA tensors staged through a pinned host buffer (staged/staged_backend.cpp); CPU tensors of a
// call go straight to the host algorithms.
std::unique_ptr<Backend> make_staged_backend();
// Float32 all_reduce on the CUDA IPC ring after agreeing on the call over the host transports;
// the rest staged (cuda_ipc/ipc_backend.cpp). The ring must span `world` ranks, this one `rank`.
std::unique_ptr<Backend> make_ipc_backend(std::unique_ptr<CudaIpcRing>&& ring, int rank, int world);
// NCCL for all_reduce, broadcast, reduce, all_gather, reduce_scatter, send and recv of CUDA
// tensors, and the queued all_reduce; the rest staged (nccl/nccl_backend.cpp). The group must span
// `world` ranks, this one `rank`.
std::unique_ptr<Backend> make_nccl_backend(std::unique_ptr<NcclGroup>&& nccl, int rank, int world);

}  // namespace engine::comm
