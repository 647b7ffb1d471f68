// comm/backends/nccl/nccl_group.h: the NCCL backend - collectives among W ranks on CUDA buffers,
// one GPU per rank, queued on the device's communication stream (core/cuda/stream.cuh).
//
// Rendezvous: rank 0 makes the ncclUniqueId and sets it in the Store under "<key>/unique_id";
// the other ranks get() it (bounded by the store's timeout). Use one key per communicator.
// The communicator is non-blocking (ncclConfig_t.blocking = 0): every call returns to us at
// once, and we poll ncclCommGetAsyncError while waiting, so a peer that dies or a collective that
// outlives the timeout aborts the communicator (ncclCommAbort) and throws (engine::Error, or
// engine::TimeoutError naming the collective) instead of hanging the job. After that every call
// throws.
//
// Ordering: each call makes the comm stream wait for the compute stream's queued work (the
// buffers may still be being written), launches, then waits on the host until the collective
// has finished: a call returns with the result in place, and the caching allocator may reuse
// the buffers at once. Sizes: `count` is elements of `dtype`.
//
// A build without CUDA has the class too; its constructor throws engine::Error.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "comm/backends/device_group.h"
#include "comm/base/deadline.h"
#include "comm/base/reduce.h"
#include "comm/base/store.h"
#include "core/cuda_backend.h"
#include "core/tensor.h"
#include "io/dtype.h"

namespace engine::comm {

class Watchdog;

struct NcclOptions {
  Millis timeout{300000};    // for init and for each collective
  std::string key = "nccl";  // store key prefix of the unique id
};

class NcclGroup : public DeviceGroup {
 public:
  // Collective over the W ranks: each calls it with its rank and its GPU.
  NcclGroup(std::shared_ptr<Store> store, int rank, int world, int device, NcclOptions opts = {});
  // Finalizes and destroys the NCCL communicator (an aborted one is only released); logs
  // failures to stderr, never throws.
  ~NcclGroup();
  // rank(), size(), device(), broken(): DeviceGroup's.
  // The next call waits on the device for `ready` (an event of device()) instead of for all the
  // compute work queued before it. The event must stay alive until that call returns.
  void order_next_after(const cuda::Event& ready) { ready_ = &ready; }

  // --- raw device buffers of device() ---
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::Sum);
  void broadcast(void* data, size_t count, DType dtype, int root);
  // Root's buffer receives the reduction; others are left unchanged.
  void reduce(void* data, size_t count, DType dtype, ReduceOp op, int root);
  // out holds size() * count elements: rank r's in lands at out + r * count.
  void all_gather(const void* in, void* out, size_t count, DType dtype);
  // in holds size() * count elements; out (count) gets the reduction of every rank's chunk r.
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype,
                      ReduceOp op = ReduceOp::Sum);
  void send(const void* data, size_t count, DType dtype, int peer);
  void recv(void* data, size_t count, DType dtype, int peer);

  // --- CUDA tensors on device() ---
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
  void broadcast(const Tensor& t, int root);
  void reduce(const Tensor& t, ReduceOp op, int root);
  void all_gather(const Tensor& in, const Tensor& out);  // out.numel() == size() * in.numel()
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::Sum);
  void send(const Tensor& t, int peer);
  void recv(const Tensor& t, int peer);

  // --- queued: no host wait ---
  // Queues an all_reduce of t on the comm stream, after `ready` (an event of device()), and
  // returns at once with an event recorded after it: the caller makes its compute stream wait on
  // that event. A watchdog thread polls the queued collectives and the communicator's async
  // error; a failure, or a collective still running after the timeout, aborts the communicator
  // (which releases the streams waiting on it) and the next call of this object throws the error
  // (engine::TimeoutError for the timeout). Gradient sync uses this: no host wait in the step.
  cuda::Event all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready);
  // Throws the watchdog's error, if any.
  void check() const;

 private:
  struct Impl;
  void check_tensor(const Tensor& t, const char* what) const;
  void check_root(int root, const char* what) const;
  Watchdog& watchdog();  // comm/health/watchdog.h, made on first use

  const cuda::Event* ready_ = nullptr;  // order_next_after(), for one call
  NcclOptions opts_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace engine::comm
