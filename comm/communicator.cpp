// comm/communicator.cpp: the Communicator's execution (inline or on the communication thread, in
// call order), its collectives on raw host buffers (the CPU backend's host_buffers: the
// algorithms of comm/algorithms/algorithms.h, or MPI's) and point-to-point messages. The Tensor
// overloads and the backends' choice are in communicator_tensor.cpp.
#include "comm/communicator.h"

#include <cstdio>

#include "comm/health/flight_recorder.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::comm {

// ---------------------------------------------------------------------------------------------
// Work

struct Work::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr err;
  // Point-to-point work is a transport request that wait() drives.
  std::shared_ptr<Transport> transport;
  RequestPtr req;
  Millis timeout{0};

  void finish(std::exception_ptr e) {
    {
      std::lock_guard lk(mu);
      done = true;
      err = e;
    }
    cv.notify_all();
  }
};

void Work::wait() {
  ENGINE_CHECK(st_, "Work::wait on an empty Work");
  if (st_->req) {
    {
      std::lock_guard lk(st_->mu);
      if (st_->done) {
        if (st_->err) std::rethrow_exception(st_->err);
        return;
      }
    }
    try {
      st_->transport->wait(st_->req, Deadline::after(st_->timeout));
      st_->finish(nullptr);
    } catch (...) {
      st_->finish(std::current_exception());
      throw;
    }
    return;
  }
  std::unique_lock lk(st_->mu);
  st_->cv.wait(lk, [&] { return st_->done; });
  if (st_->err) std::rethrow_exception(st_->err);
}

bool Work::completed() const {
  if (!st_) return false;
  if (st_->req) return st_->transport->test(st_->req);
  std::lock_guard lk(st_->mu);
  return st_->done;
}

// ---------------------------------------------------------------------------------------------
// Execution

namespace {
thread_local const Communicator* tl_executing = nullptr;

struct ExecutingScope {
  const Communicator* prev;
  explicit ExecutingScope(const Communicator* c) : prev(tl_executing) { tl_executing = c; }
  ~ExecutingScope() { tl_executing = prev; }
};
}  // namespace

Communicator::Communicator(std::shared_ptr<Transport> transport, CommOptions opts,
                           std::shared_ptr<Store> store)
    : transport_(std::move(transport)),
      opts_(opts),
      store_(std::move(store)),
      p2p_sent_(transport_->world(), 0),
      p2p_recvd_(transport_->world(), 0) {
  set_segment_bytes(opts_.segment_bytes);
  flight_ = FlightRecorder::get().new_comm();
}

void Communicator::shutdown() {
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Work::State>>> left;
  {
    std::lock_guard lk(qmu_);
    stop_ = true;
    left.swap(queue_);
    if (busy_ || !left.empty())
      transport_->abort("rank " + std::to_string(rank()) +
                        " destroyed its communicator with collectives still running");
  }
  qcv_.notify_all();
  if (worker_.joinable()) worker_.join();
  for (auto& [fn, st] : left)
    st->finish(
        std::make_exception_ptr(Error("communicator destroyed before this queued collective ran")));
}

void Communicator::set_segment_bytes(size_t nbytes) {
  ENGINE_CHECK(nbytes >= 8, "segment size must be at least 8 bytes, got ", nbytes);
  opts_.segment_bytes = nbytes;
}

void Communicator::run(const std::function<void()>& fn) {
  auto guarded = [&] {
    try {
      fn();
      transport_->progress().completed.store(seq_, std::memory_order_relaxed);
      FlightRecorder::get().completed(flight_);
    } catch (const std::exception& e) {
      FlightRecorder::get().failed(flight_, e.what(), rank());
      // Whatever failed mid-collective leaves peers mid-collective too: break the communicator so
      // that they fail now, not at their timeout.
      transport_->abort(e.what());
      throw;
    }
  };
  if (tl_executing == this) {
    guarded();
    return;
  }
  bool inline_run = false;
  {
    std::lock_guard lk(qmu_);
    if (!busy_ && queue_.empty()) busy_ = inline_run = true;
  }
  if (!inline_run) {
    enqueue(fn).wait();
    return;
  }
  ExecutingScope scope(this);
  try {
    guarded();
  } catch (...) {
    std::lock_guard lk(qmu_);
    busy_ = false;
    qcv_.notify_all();
    throw;
  }
  std::lock_guard lk(qmu_);
  busy_ = false;
  qcv_.notify_all();
}

Work Communicator::enqueue(std::function<void()> fn) {
  Work w;
  w.st_ = std::make_shared<Work::State>();
  std::lock_guard lk(qmu_);
  ENGINE_CHECK(!stop_, "communicator is being destroyed");
  queue_.emplace_back(
      [this, fn = std::move(fn)] {
        try {
          fn();
          transport_->progress().completed.store(seq_, std::memory_order_relaxed);
          FlightRecorder::get().completed(flight_);
        } catch (const std::exception& e) {
          FlightRecorder::get().failed(flight_, e.what(), rank());
          transport_->abort(e.what());
          throw;
        }
      },
      w.st_);
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  qcv_.notify_all();
  return w;
}

void Communicator::worker_loop() {
  ExecutingScope scope(this);
  // CUDA collectives run here: on the rank's device, never the runtime's default GPU 0.
  cuda::enter_home_device();
  while (true) {
    std::unique_lock lk(qmu_);
    qcv_.wait(lk, [&] { return stop_ || (!queue_.empty() && !busy_); });
    if (stop_) return;
    auto [fn, st] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    std::exception_ptr err;
    try {
      fn();
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    busy_ = false;
    lk.unlock();
    qcv_.notify_all();
    st->finish(err);
  }
}

Work Communicator::submit(std::function<void(Communicator&)> fn) {
  return enqueue([this, fn = std::move(fn)] { fn(*this); });
}

CollContext Communicator::call(CollOp op, size_t count, DType dtype, ReduceOp redop, int root) {
  Fingerprint f;
  f.seq = ++seq_;
  transport_->progress().started.store(f.seq, std::memory_order_relaxed);
  f.op = op;
  f.count = count;
  f.dtype = dtype;
  f.redop = redop;
  f.root = root;
  f.group = group_;
  FlightRecorder::get().started(flight_, f);
  return CollContext{*transport_, f, opts_.timeout, opts_.segment_bytes, observer_, opts_.algo};
}

void Communicator::check_root(int root, const char* what) const {
  ENGINE_CHECK(root >= 0 && root < size(), what, ": root ", root, " is not a rank of this job (",
               size(), " ranks)");
}

// ---------------------------------------------------------------------------------------------
// Public collectives on raw buffers

void Communicator::all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  check_reduce_supported(dtype, op);
  run([&] { host_all_reduce(call(CollOp::AllReduce, count, dtype, op, -1), data); });
}

void Communicator::broadcast(void* data, size_t count, DType dtype, int root) {
  check_root(root, "broadcast");
  run([&] {
    host_->host_buffers(call(CollOp::Broadcast, count, dtype, ReduceOp::Sum, root), nullptr, data);
  });
}

void Communicator::reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) {
  check_root(root, "reduce");
  check_reduce_supported(dtype, op);
  run([&] { host_->host_buffers(call(CollOp::Reduce, count, dtype, op, root), nullptr, data); });
}

void Communicator::all_gather(const void* in, void* out, size_t count, DType dtype) {
  run([&] {
    host_->host_buffers(call(CollOp::AllGather, count, dtype, ReduceOp::Sum, -1), in, out);
  });
}

void Communicator::gather(const void* in, void* out, size_t count, DType dtype, int root) {
  check_root(root, "gather");
  ENGINE_CHECK(rank() != root || out || count == 0, "gather: the root needs an output buffer");
  run([&] {
    host_->host_buffers(call(CollOp::Gather, count, dtype, ReduceOp::Sum, root), in, out);
  });
}

void Communicator::scatter(const void* in, void* out, size_t count, DType dtype, int root) {
  check_root(root, "scatter");
  ENGINE_CHECK(rank() != root || in || count == 0, "scatter: the root needs an input buffer");
  run([&] {
    host_->host_buffers(call(CollOp::Scatter, count, dtype, ReduceOp::Sum, root), in, out);
  });
}

void Communicator::reduce_scatter(const void* in, void* out, size_t count, DType dtype,
                                  ReduceOp op) {
  check_reduce_supported(dtype, op);
  run([&] { host_->host_buffers(call(CollOp::ReduceScatter, count, dtype, op, -1), in, out); });
}

void Communicator::barrier() {
  run([&] {
    host_->host_buffers(call(CollOp::Barrier, 0, DType::F32, ReduceOp::Sum, -1), nullptr, nullptr);
  });
}

Work Communicator::all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) {
  check_reduce_supported(dtype, op);
  return enqueue(
      [=, this] { host_all_reduce(call(CollOp::AllReduce, count, dtype, op, -1), data); });
}

Work Communicator::broadcast_async(void* data, size_t count, DType dtype, int root) {
  check_root(root, "broadcast");
  return enqueue([=, this] {
    host_->host_buffers(call(CollOp::Broadcast, count, dtype, ReduceOp::Sum, root), nullptr, data);
  });
}

Work Communicator::reduce_async(void* data, size_t count, DType dtype, ReduceOp op, int root) {
  check_root(root, "reduce");
  check_reduce_supported(dtype, op);
  return enqueue([=, this] {
    host_->host_buffers(call(CollOp::Reduce, count, dtype, op, root), nullptr, data);
  });
}

// ---------------------------------------------------------------------------------------------
// Point to point

Work Communicator::post_p2p(bool is_send, void* data, size_t count, DType dt, int peer, int tag) {
  ENGINE_CHECK(peer >= 0 && peer < size() && peer != rank(), is_send ? "send" : "recv", ": rank ",
               peer, " is not another rank of this job (rank ", rank(), " of ", size(), ")");
  Fingerprint f;
  f.op = CollOp::Send;
  f.dtype = dt;
  f.count = count;
  f.root = tag;
  f.group = group_;
  RequestPtr req;
  {
    // Numbering and posting together, so that concurrent callers keep the two in step.
    std::lock_guard lk(p2p_mu_);
    f.seq = is_send ? p2p_sent_[peer]++ : p2p_recvd_[peer]++;
    FrameHeader h = FrameHeader::data(f, 0, count * dtype_size(dt));
    req = is_send ? transport_->isend(peer, Lane::P2P, h, data)
                  : transport_->irecv(peer, Lane::P2P, h, data);
  }
  Work w;
  w.st_ = std::make_shared<Work::State>();
  w.st_->transport = transport_;
  w.st_->req = req;
  w.st_->timeout = opts_.timeout;
  return w;
}

void Communicator::send(const void* data, size_t count, DType dtype, int dst, int tag) {
  isend(data, count, dtype, dst, tag).wait();
}

void Communicator::recv(void* data, size_t count, DType dtype, int src, int tag) {
  irecv(data, count, dtype, src, tag).wait();
}

Work Communicator::isend(const void* data, size_t count, DType dtype, int dst, int tag) {
  return post_p2p(true, const_cast<void*>(data), count, dtype, dst, tag);
}

Work Communicator::irecv(void* data, size_t count, DType dtype, int src, int tag) {
  return post_p2p(false, data, count, dtype, src, tag);
}

}  // namespace engine::comm
