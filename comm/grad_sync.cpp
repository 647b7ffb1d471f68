// comm/grad_sync.cpp: the three gradient synchronisations.
#include "comm/grad_sync.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/cuda_backend.h"
#include "core/error.h"
#include "core/trace.h"

namespace engine::comm {

struct GradSync::Bucket {
  Tensor flat;         // (count) packed gradients, on the parameters' device
  size_t pending = 0;  // gradients not yet packed this step
  bool launched = false;
  Work work;           // on the communication thread
  cuda::Event queued;  // NCCL, queued on the device: done when this event is
};

SyncMode sync_mode_from_name(const std::string& s) {
  if (s == "allreduce") return SyncMode::AllReduce;
  if (s == "reduce-broadcast") return SyncMode::ReduceBroadcast;
  if (s == "bucketed") return SyncMode::Bucketed;
  ENGINE_FAIL("unknown gradient sync '", s, "': expected allreduce|reduce-broadcast|bucketed");
}

const char* sync_mode_name(SyncMode m) {
  switch (m) {
    case SyncMode::AllReduce:
      return "allreduce";
    case SyncMode::ReduceBroadcast:
      return "reduce-broadcast";
    case SyncMode::Bucketed:
      return "bucketed";
  }
  return "?";
}

GradSync::GradSync(Communicator& comm, NamedParams params, SyncMode mode, size_t bucket_bytes)
    : comm_(comm), params_(std::move(params)), mode_(mode) {
  for (auto& [n, p] : params_) {
    ENGINE_CHECK(p.dtype() == DType::F32, "gradient sync: parameter '", n, "' must be float32");
    ENGINE_CHECK(p.device() == params_.front().second.device(), "gradient sync: parameter '", n,
                 "' is on ", p.device().str(), ", the first on ",
                 params_.front().second.device().str(), ": one device per rank");
  }
  if (!params_.empty()) device_ = params_.front().second.device();
  if (mode_ != SyncMode::Bucketed) return;
  ENGINE_CHECK(bucket_bytes >= 4, "gradient sync: bucket size ", bucket_bytes,
               " bytes is too small");
  // Reverse order: the last layer's gradients are final first during backward.
  bucket_of_.resize(params_.size());
  offset_of_.resize(params_.size());
  size_t bytes = 0;
  for (size_t i = params_.size(); i-- > 0;) {
    size_t nb = params_[i].second.nbytes();
    if (bucket_params_.empty() || (bytes > 0 && bytes + nb > bucket_bytes)) {
      bucket_params_.emplace_back();
      bytes = 0;
    }
    bucket_of_[i] = bucket_params_.size() - 1;
    offset_of_[i] = bytes / 4;
    bucket_params_.back().push_back(i);
    bytes += nb;
  }
  for (auto& members : bucket_params_) {
    auto* b = new Bucket;
    size_t count = 0;
    for (size_t i : members) count += params_[i].second.numel();
    b->flat = Tensor::zeros({static_cast<int64_t>(count)}, DType::F32, device_);
    buckets_.push_back(b);
  }
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].second.register_grad_ready_hook([this, i, alive = alive_](const Tensor& g) {
      if (*alive) on_grad_ready(i, g);
    });
}

GradSync::~GradSync() {
  *alive_ = false;  // the hooks stay on the parameters; they must not reach a dead GradSync
  for (Bucket* b : buckets_) {
    try {
      if (b->work.valid()) b->work.wait();
      // A queued NCCL all_reduce may still write the bucket: compute (which reuses freed
      // blocks) waits for it.
      if (b->queued.defined()) b->queued.block(cuda::Stream::Compute);
    } catch (...) {
      // The error was or will be reported by finish(); a destructor never throws.
    }
    delete b;
  }
}

void GradSync::begin(int64_t step) {
  (void)step;
  armed_ = true;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    buckets_[k]->pending = bucket_params_[k].size();
    buckets_[k]->launched = false;
    buckets_[k]->work = Work();
    buckets_[k]->queued = cuda::Event();
  }
}

int64_t GradSync::bytes_per_step(int64_t step) const {
  (void)step;
  int64_t count = 0;
  for (const auto& [name, p] : params_) count += p.numel();
  const int64_t world = comm_.size();
  return 2 * (world - 1) * count * 4 / world;
}

void GradSync::on_grad_ready(size_t i, const Tensor& g) {
  if (!armed_) return;
  Bucket* b = buckets_[bucket_of_[i]];
  // On a GPU the copy is queued on the compute stream, behind the kernel that made g.
  b->flat.flat_slice(static_cast<int64_t>(offset_of_[i]), g.numel()).copy_from(g);
  if (--b->pending == 0) launch(bucket_of_[i]);
}

void GradSync::launch(size_t k) {
  Bucket* b = buckets_[k];
  b->launched = true;
  Tensor flat = b->flat;
  // On a GPU the bucket's all_reduce waits (on the device) for this point of the compute stream:
  // its gradients are packed, and the rest of backward goes on beside it.
  std::shared_ptr<cuda::Event> ready;
  if (flat.device().is_cuda())
    ready = std::make_shared<cuda::Event>(
        cuda::Event::record(flat.device().index, cuda::Stream::Compute));
  // NCCL: queued on the comm stream from here, no thread, no wait.
  if (ready && comm_.queues_all_reduce()) {
    trace::Scope ts("allreduce (queued)", "comm");
    ts.arg("bucket", k).arg("bytes", flat.nbytes());
    b->queued = comm_.all_reduce_queued(flat, ReduceOp::Avg, *ready);
    return;
  }
  b->work = comm_.submit([flat, k, ready](Communicator& c) {
    if (trace::enabled()) trace::set_thread_name("comm");
    trace::Scope ts("allreduce", "comm");
    ts.arg("bucket", k).arg("bytes", flat.nbytes());
    if (ready)
      c.all_reduce_after(flat, ReduceOp::Avg, *ready);
    else
      c.all_reduce(flat, ReduceOp::Avg);
  });
}

void GradSync::finish() {
  armed_ = false;
  const int world = comm_.size();
  if (mode_ == SyncMode::Bucketed) {
    // Buckets whose parameters did not all get gradients: zeros stand in, then launch in order.
    for (size_t k = 0; k < buckets_.size(); ++k) {
      Bucket* b = buckets_[k];
      if (b->launched) continue;
      for (size_t i : bucket_params_[k])
        if (!params_[i].second.grad().defined())
          b->flat.flat_slice(static_cast<int64_t>(offset_of_[i]), params_[i].second.numel())
              .fill_(0.0f);
      launch(k);
    }
    {
      trace::Scope ts("allreduce wait", "comm");
      for (size_t k = 0; k < buckets_.size(); ++k) {
        Bucket* b = buckets_[k];
        if (b->queued.defined()) {
          b->queued.block(cuda::Stream::Compute);  // the device waits, not the host
          b->queued = cuda::Event();
        } else {
          b->work.wait();
        }
      }
      if (device_.is_cuda()) comm_.check_queued();
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& p = params_[i].second;
      if (!p.grad().defined()) p.set_grad(Tensor::empty(p.shape(), DType::F32, p.device()));
      p.grad().copy_from(
          buckets_[bucket_of_[i]]->flat.flat_slice(static_cast<int64_t>(offset_of_[i]), p.numel()));
    }
    return;
  }
  trace::Scope ts(mode_ == SyncMode::AllReduce ? "allreduce" : "reduce+broadcast", "comm");
  for (auto& [n, p] : params_) {
    if (!p.grad().defined()) p.set_grad(Tensor::zeros(p.shape(), DType::F32, p.device()));
    Tensor g = p.grad();
    if (mode_ == SyncMode::AllReduce) {
      comm_.all_reduce(g, ReduceOp::Sum);
      g.mul_(1.0f / static_cast<float>(world));
    } else {
      comm_.reduce(g, ReduceOp::Sum, 0);
      if (comm_.rank() == 0) g.mul_(1.0f / static_cast<float>(world));
      comm_.broadcast(g, 0);
    }
  }
}

namespace {

// like's elements at byte `offset` of flat's storage (flat: U8, contiguous).
Tensor bytes_as(const Tensor& flat, size_t offset, const Tensor& like) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = flat.impl()->storage;
  impl->offset_bytes = flat.impl()->offset_bytes + offset;
  impl->shape = like.shape();
  impl->strides = contiguous_strides(like.shape());
  impl->dtype = like.dtype();
  return Tensor(impl);
}

}  // namespace

// The tensors of each device travel packed in one byte buffer (each at an offset aligned to 8
// bytes): one broadcast per device instead of one per tensor (BatchNorm's running statistics and
// counts: 6 tensors for convnet, broadcast before every step).
void broadcast_tensors(Communicator& comm, const NamedParams& tensors, int root) {
  std::vector<Device> devices;
  for (const auto& [n, t] : tensors)
    if (std::find(devices.begin(), devices.end(), t.device()) == devices.end())
      devices.push_back(t.device());
  for (const Device& dev : devices) {
    std::vector<std::pair<Tensor, size_t>> parts;  // (tensor, byte offset)
    size_t nbytes = 0;
    for (const auto& [n, t] : tensors) {
      if (t.device() != dev) continue;
      parts.emplace_back(t, nbytes);
      nbytes += (t.nbytes() + 7) / 8 * 8;
    }
    if (parts.size() == 1) {
      comm.broadcast(parts[0].first, root);
      continue;
    }
    Tensor flat = Tensor::empty({static_cast<int64_t>(nbytes)}, DType::U8, dev);
    if (comm.rank() == root)
      for (auto& [t, at] : parts) bytes_as(flat, at, t).copy_from(t);
    comm.broadcast(flat, root);
    if (comm.rank() != root)
      for (auto& [t, at] : parts) Tensor(t).copy_from(bytes_as(flat, at, t));
  }
}

}  // namespace engine::comm
