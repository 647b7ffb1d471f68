// comm/backends/nccl/nccl_group.cpp: the NCCL backend (see nccl_group.h). With CUDA: a
// non-blocking ncclComm_t driven on the device's comm stream, every wait a poll that watches
// ncclCommGetAsyncError and the deadline. Without CUDA: a constructor that says so.
#include "comm/backends/nccl/nccl_group.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/error.h"

#ifdef ENGINE_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "comm/backends/nccl/nccl_check.h"
#include "comm/health/watchdog.h"
#include "core/cuda/check.cuh"
#include "core/cuda/stream.cuh"
#include "core/cuda_backend.h"
#endif

namespace engine::comm {

void NcclGroup::check_tensor(const Tensor& t, const char* what) const {
  ENGINE_CHECK(t.defined(), "nccl ", what, ": tensor is undefined");
  ENGINE_CHECK(t.device() == Device::cuda(device_), "nccl ", what, ": tensor on ", t.device().str(),
               ", this rank's communicator runs on cuda:", device_);
}

void NcclGroup::check_root(int root, const char* what) const {
  ENGINE_CHECK(root >= 0 && root < world_, "nccl ", what, ": root ", root, " outside [0, ", world_,
               ")");
}

void NcclGroup::all_reduce(const Tensor& t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  all_reduce(t.raw_data(), t.numel(), t.dtype(), op);
}
void NcclGroup::broadcast(const Tensor& t, int root) {
  check_tensor(t, "broadcast");
  broadcast(t.raw_data(), t.numel(), t.dtype(), root);
}
void NcclGroup::reduce(const Tensor& t, ReduceOp op, int root) {
  check_tensor(t, "reduce");
  reduce(t.raw_data(), t.numel(), t.dtype(), op, root);
}
void NcclGroup::all_gather(const Tensor& in, const Tensor& out) {
  check_tensor(in, "all_gather");
  check_tensor(out, "all_gather");
  ENGINE_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * world_,
               "nccl all_gather: out ", shape_str(out.shape()), " ", dtype_name(out.dtype()),
               " must hold ", world_, " x ", in.numel(), " ", dtype_name(in.dtype()));
  all_gather(in.raw_data(), out.raw_data(), in.numel(), in.dtype());
}
void NcclGroup::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_tensor(in, "reduce_scatter");
  check_tensor(out, "reduce_scatter");
  ENGINE_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * world_,
               "nccl reduce_scatter: in ", shape_str(in.shape()), " ", dtype_name(in.dtype()),
               " must hold ", world_, " x ", out.numel(), " ", dtype_name(out.dtype()));
  reduce_scatter(in.raw_data(), out.raw_data(), out.numel(), out.dtype(), op);
}
void NcclGroup::send(const Tensor& t, int peer) {
  check_tensor(t, "send");
  send(t.raw_data(), t.numel(), t.dtype(), peer);
}
void NcclGroup::recv(const Tensor& t, int peer) {
  check_tensor(t, "recv");
  recv(t.raw_data(), t.numel(), t.dtype(), peer);
}

#ifdef ENGINE_WITH_CUDA

void nccl_fail(ncclResult_t r, const char* expr, const char* file, int line, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  throw Error(detail::concat("NCCL error at ", file, ":", line, ": ", expr, ": ",
                             ncclGetErrorString(r), last && *last ? " - " : "", last ? last : ""));
}

namespace {

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F32:
      return ncclFloat32;
    case DType::I64:
      return ncclInt64;
    case DType::U8:
      return ncclUint8;
    case DType::I32:
      return ncclInt32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::F64:
      return ncclFloat64;
  }
  ENGINE_FAIL("nccl: unsupported dtype ", static_cast<int>(dt));
}

ncclRedOp_t nccl_op(ReduceOp op, DType dt) {
  check_reduce_supported(dt, op);
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Prod:
      return ncclProd;
  }
  ENGINE_FAIL("nccl: unsupported reduce op ", static_cast<int>(op));
}

void pause() {
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

struct NcclGroup::Impl {
  ncclComm_t comm = nullptr;  // null once aborted
  cudaEvent_t done = nullptr;
  // Calls and the watchdog's abort take turns on the communicator.
  std::mutex comm_mu;
  // Watches the queued collectives (all_reduce_queued); made on first use.
  std::unique_ptr<Watchdog> watchdog;
};

NcclGroup::NcclGroup(std::shared_ptr<Store> store, int rank, int world, int device,
                     NcclOptions opts)
    : DeviceGroup(rank, world, device),
      opts_(std::move(opts)),
      store_(std::move(store)),
      impl_(std::make_unique<Impl>()) {
  ENGINE_CHECK(store_ != nullptr, "nccl init: no store");
  ENGINE_CHECK(world_ >= 1 && rank_ >= 0 && rank_ < world_, "nccl init: rank ", rank_, " of world ",
               world_);
  check_cuda_device(device_, detail::concat("nccl init on rank ", rank_));
  cuda::DeviceGuard guard(device_);
  // The unique id: made by rank 0, fetched by the others through the store.
  const std::string key = opts_.key + "/unique_id";
  ncclUniqueId id;
  if (rank_ == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    store_->set(key, std::string(id.internal, sizeof id.internal));
  } else {
    const std::string v = store_->get(key);
    ENGINE_CHECK(v.size() == sizeof id.internal, "nccl init on rank ", rank_, ": store key '", key,
                 "' holds ", v.size(), " bytes, an ncclUniqueId has ", sizeof id.internal);
    std::memcpy(id.internal, v.data(), v.size());
  }
  CUDA_CHECK(cudaEventCreateWithFlags(&impl_->done, cudaEventDisableTiming));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&impl_->comm, world_, id, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (impl_->comm) (void)ncclCommAbort(impl_->comm);
    impl_->comm = nullptr;
    broken_ = true;
    nccl_fail(r, "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
  // Poll until every rank has joined, a rank fails, or the deadline passes.
  const Deadline deadline = Deadline::after(opts_.timeout);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(impl_->comm, &state));
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      const std::string last = ncclGetLastError(impl_->comm);
      (void)ncclCommAbort(impl_->comm);
      impl_->comm = nullptr;
      broken_ = true;
      ENGINE_FAIL("nccl init on rank ", rank_, " of ", world_, " (cuda:", device_,
                  ") failed: ", ncclGetErrorString(state), last.empty() ? "" : " - ", last);
    }
    if (deadline.expired()) {
      (void)ncclCommAbort(impl_->comm);
      impl_->comm = nullptr;
      broken_ = true;
      throw TimeoutError(detail::concat("nccl init on rank ", rank_, " of ", world_, " (cuda:",
                                        device_, "): the other ranks did not join within ",
                                        seconds_str(opts_.timeout), "; communicator aborted"));
    }
    pause();
  }
}

NcclGroup::~NcclGroup() {
  if (!impl_) return;
  impl_->watchdog.reset();  // joins it; the events it still watched are destroyed
  if (impl_->comm) {
    const cudaError_t set = cudaSetDevice(device_);
    (void)set;
    bool ok = !broken_;
    if (ok) {
      const ncclResult_t f = ncclCommFinalize(impl_->comm);
      ok = f == ncclSuccess || f == ncclInProgress;
    }
    // Finalize flushes issued work; give it a few seconds, then abort.
    const Deadline deadline = Deadline::after(Millis(5000));
    while (ok) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(impl_->comm, &state) != ncclSuccess)
        ok = false;
      else if (state == ncclSuccess)
        break;
      else if (state != ncclInProgress || deadline.expired())
        ok = false;
      else
        pause();
    }
    const ncclResult_t r = ok ? ncclCommDestroy(impl_->comm) : ncclCommAbort(impl_->comm);
    if (r != ncclSuccess && r != ncclInProgress)
      std::fprintf(stderr, "engine: nccl communicator of rank %d: %s failed: %s\n", rank_,
                   ok ? "ncclCommDestroy" : "ncclCommAbort", ncclGetErrorString(r));
  }
  if (impl_->done) (void)cudaEventDestroy(impl_->done);
}

namespace {

// Runs one NCCL call on the comm stream after the compute stream's queued work, then waits for
// it: issue (the non-blocking comm may answer ncclInProgress), record an event, poll both the
// event and the communicator's async error until done, failed or past the deadline.
template <class Launch>
void run_collective(ncclComm_t& comm, cudaEvent_t done, int rank, int world, int device,
                    Millis timeout, bool& broken, const cuda::Event*& ready, const char* what,
                    size_t count, Launch launch) {
  const cuda::Event* after = ready;
  ready = nullptr;
  ENGINE_CHECK(!broken && comm != nullptr, "nccl ", what, " on rank ", rank,
               ": the communicator was aborted by an earlier error");
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::comm_stream(device);
  cuda::comm_after(device, after);
  const Deadline deadline = Deadline::after(timeout);
  auto abort_with = [&](const std::string& why, bool timed_out) {
    (void)ncclCommAbort(comm);
    comm = nullptr;
    broken = true;
    const std::string msg =
        detail::concat("nccl ", what, " of ", count, " elements on rank ", rank, " of ", world,
                       " (cuda:", device, ") ", why, "; communicator aborted");
    if (timed_out) throw TimeoutError(msg);
    throw Error(msg);
  };
  auto poll_async = [&]() -> bool {  // true while the communicator is still busy issuing
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) abort_with(detail::concat("failed: ", ncclGetErrorString(q)), false);
    if (state != ncclSuccess && state != ncclInProgress) {
      const char* last = ncclGetLastError(comm);
      abort_with(detail::concat("failed: ", ncclGetErrorString(state), last && *last ? " - " : "",
                                last ? last : ""),
                 false);
    }
    return state == ncclInProgress;
  };
  const ncclResult_t r = launch(stream);
  if (r != ncclSuccess && r != ncclInProgress) {
    const char* last = ncclGetLastError(comm);
    abort_with(detail::concat("failed to start: ", ncclGetErrorString(r),
                              last && *last ? " - " : "", last ? last : ""),
               false);
  }
  while (poll_async()) {  // a non-blocking communicator may still be enqueueing
    if (deadline.expired())
      abort_with(detail::concat("was not issued within ", seconds_str(timeout)), true);
    pause();
  }
  CUDA_CHECK(cudaEventRecord(done, stream));
  for (;;) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
    (void)poll_async();  // a dead peer shows up here
    if (deadline.expired())
      abort_with(detail::concat("did not complete within ", seconds_str(timeout),
                                " (a peer may be dead or calling another collective)"),
                 true);
    pause();
  }
}

}  // namespace

#define ENGINE_NCCL_RUN(what, count, ...)                                                    \
  do {                                                                                       \
    check();                                                                                 \
    std::lock_guard<std::mutex> comm_lock(impl_->comm_mu);                                   \
    run_collective(impl_->comm, impl_->done, rank_, world_, device_, opts_.timeout, broken_, \
                   ready_, what, count, [&](cudaStream_t stream) { return __VA_ARGS__; });   \
  } while (0)

void NcclGroup::all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  const ncclRedOp_t rop = nccl_op(op, dtype);
  ENGINE_NCCL_RUN("all_reduce", count,
                  ncclAllReduce(data, data, count, nccl_type(dtype), rop, impl_->comm, stream));
}

void NcclGroup::broadcast(void* data, size_t count, DType dtype, int root) {
  check_root(root, "broadcast");
  ENGINE_NCCL_RUN("broadcast", count,
                  ncclBroadcast(data, data, count, nccl_type(dtype), root, impl_->comm, stream));
}

void NcclGroup::reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) {
  check_root(root, "reduce");
  const ncclRedOp_t rop = nccl_op(op, dtype);
  ENGINE_NCCL_RUN("reduce", count,
                  ncclReduce(data, data, count, nccl_type(dtype), rop, root, impl_->comm, stream));
}

void NcclGroup::all_gather(const void* in, void* out, size_t count, DType dtype) {
  ENGINE_NCCL_RUN("all_gather", count,
                  ncclAllGather(in, out, count, nccl_type(dtype), impl_->comm, stream));
}

void NcclGroup::reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  const ncclRedOp_t rop = nccl_op(op, dtype);
  ENGINE_NCCL_RUN("reduce_scatter", count,
                  ncclReduceScatter(in, out, count, nccl_type(dtype), rop, impl_->comm, stream));
}

void NcclGroup::send(const void* data, size_t count, DType dtype, int peer) {
  check_root(peer, "send");
  ENGINE_NCCL_RUN("send", count,
                  ncclSend(data, count, nccl_type(dtype), peer, impl_->comm, stream));
}

void NcclGroup::recv(void* data, size_t count, DType dtype, int peer) {
  check_root(peer, "recv");
  ENGINE_NCCL_RUN("recv", count,
                  ncclRecv(data, count, nccl_type(dtype), peer, impl_->comm, stream));
}

void NcclGroup::check() const {
  if (!impl_->watchdog) return;
  const std::string error = impl_->watchdog->error();
  if (error.empty()) return;
  if (impl_->watchdog->timed_out()) throw TimeoutError(error);
  throw Error(error);
}

namespace {

// A queued collective as the watchdog sees it: its own event (the caller's may go first).
class EventProbe final : public Watchdog::Probe {
 public:
  explicit EventProbe(cudaEvent_t ev) : ev_(ev) {}
  ~EventProbe() override { (void)cudaEventDestroy(ev_); }
  State poll(std::string* why) override {
    const cudaError_t q = cudaEventQuery(ev_);
    if (q == cudaSuccess) return State::Done;
    if (q == cudaErrorNotReady) return State::Running;
    *why = detail::concat("failed: ", cudaGetErrorString(q));
    return State::Failed;
  }

 private:
  cudaEvent_t ev_;
};

}  // namespace

// The watchdog (comm/health/watchdog.h): its thread works on this rank's device, looks at the front
// collective's event every 2 ms while it runs, and on a failure or a passed deadline aborts the
// communicator (under comm_mu, so never beside a call), which also makes NCCL's kernels return, so
// the streams waiting on them drain.
Watchdog& NcclGroup::watchdog() {
  if (impl_->watchdog) return *impl_->watchdog;
  Impl& im = *impl_;
  Watchdog::Hooks h;
  h.on_start = [device = device_, rank = rank_] {
    try {
      cuda::set_thread_device(device);  // else cudaEventQuery would make a context on GPU 0
    } catch (const std::exception& e) {
      std::fprintf(stderr, "engine: nccl watchdog of rank %d: %s\n", rank, e.what());
    }
  };
  h.async_error = [&im]() -> std::string {
    std::lock_guard<std::mutex> cl(im.comm_mu);
    ncclResult_t state = ncclSuccess;
    if (im.comm && ncclCommGetAsyncError(im.comm, &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress)
      return detail::concat("failed: ", ncclGetErrorString(state));
    return "";
  };
  h.describe = [this](const std::string& what, const std::string& why) {
    return detail::concat("nccl ", what, " on rank ", rank_, " of ", world_, " (cuda:", device_,
                          ") ", why, "; communicator aborted");
  };
  h.abort = [&im] {
    {
      std::lock_guard<std::mutex> cl(im.comm_mu);
      if (im.comm) (void)ncclCommAbort(im.comm);
      im.comm = nullptr;
    }
    std::fprintf(stderr, "engine: %s\n", im.watchdog->error().c_str());
  };
  im.watchdog = std::make_unique<Watchdog>(std::move(h), Millis(2));
  return *im.watchdog;
}

cuda::Event NcclGroup::all_reduce_queued(const Tensor& t, ReduceOp op, const cuda::Event& ready) {
  check_tensor(t, "all_reduce");
  check();
  const ncclRedOp_t rop = nccl_op(op, t.dtype());
  cuda::DeviceGuard guard(device_);
  cuda::Event done;
  {
    std::lock_guard<std::mutex> cl(impl_->comm_mu);
    ENGINE_CHECK(!broken_ && impl_->comm != nullptr, "nccl all_reduce on rank ", rank_,
                 ": the communicator was aborted by an earlier error");
    ready.block(cuda::Stream::Comm);
    const ncclResult_t r =
        ncclAllReduce(t.raw_data(), t.raw_data(), t.numel(), nccl_type(t.dtype()), rop, impl_->comm,
                      cuda::comm_stream(device_));
    if (r != ncclSuccess && r != ncclInProgress) {
      const std::string last = ncclGetLastError(impl_->comm);
      (void)ncclCommAbort(impl_->comm);
      impl_->comm = nullptr;
      broken_ = true;
      ENGINE_FAIL("nccl all_reduce of ", t.numel(), " elements on rank ", rank_,
                  " failed to start: ", ncclGetErrorString(r), last.empty() ? "" : " - ", last);
    }
    // A non-blocking communicator may still be enqueueing: the event must follow the kernel.
    const Deadline deadline = Deadline::after(opts_.timeout);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(impl_->comm, &state));
      if (state == ncclSuccess) break;
      if (state != ncclInProgress || deadline.expired()) {
        (void)ncclCommAbort(impl_->comm);
        impl_->comm = nullptr;
        broken_ = true;
        ENGINE_FAIL("nccl all_reduce of ", t.numel(), " elements on rank ", rank_, " ",
                    state == ncclInProgress ? "was not issued within the timeout"
                                            : ncclGetErrorString(state),
                    "; communicator aborted");
      }
      pause();
    }
    done = cuda::Event::record(device_, cuda::Stream::Comm);
  }
  // The watchdog gets its own event (the caller's may be gone before the collective is).
  cudaEvent_t watched = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&watched, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(watched, cuda::comm_stream(device_)));
  watchdog().watch(std::make_unique<EventProbe>(watched), Deadline::after(opts_.timeout),
                   detail::concat("all_reduce of ", t.numel(), " elements (queued)"));
  return done;
}

#undef ENGINE_NCCL_RUN

#else  // no CUDA: the class exists so callers need no #ifdef; making one throws.

struct NcclGroup::Impl {};

NcclGroup::NcclGroup(std::shared_ptr<Store>, int rank, int world, int device, NcclOptions)
    : DeviceGroup(rank, world, device) {
  ENGINE_FAIL("nccl init on rank ", rank,
              ": NCCL is not built in (configure with -DENGINE_CUDA=ON on a machine with nvcc)");
}
NcclGroup::~NcclGroup() = default;

namespace {
[[noreturn]] void not_built(const char* what) {
  ENGINE_FAIL("nccl ", what, ": NCCL is not built in");
}
}  // namespace

void NcclGroup::all_reduce(void*, size_t, DType, ReduceOp) {
  not_built("all_reduce");
}
void NcclGroup::broadcast(void*, size_t, DType, int) {
  not_built("broadcast");
}
void NcclGroup::reduce(void*, size_t, DType, ReduceOp, int) {
  not_built("reduce");
}
void NcclGroup::all_gather(const void*, void*, size_t, DType) {
  not_built("all_gather");
}
void NcclGroup::reduce_scatter(const void*, void*, size_t, DType, ReduceOp) {
  not_built("reduce_scatter");
}
void NcclGroup::send(const void*, size_t, DType, int) {
  not_built("send");
}
void NcclGroup::recv(void*, size_t, DType, int) {
  not_built("recv");
}
void NcclGroup::check() const {}
cuda::Event NcclGroup::all_reduce_queued(const Tensor&, ReduceOp, const cuda::Event&) {
  not_built("all_reduce");
}

#endif  // ENGINE_WITH_CUDA

}  // namespace engine::comm
