// comm/grad_sync.cpp: the three gradient synchronisations.
#include "comm/grad_sync.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/cuda_backend.h"
#include "core/error.h"
#include "core/sync_guard.h"
#include "core/trace.h"

namespace engine::comm {

struct GradSync::Bucket {
  Tensor flat;         // (count) packed gradients, on the parameters' device (a codec's: host)
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
  check_params();
  if (mode_ == SyncMode::Bucketed) plan_buckets(bucket_bytes);
}

GradSync::GradSync(Communicator& comm, NamedParams params, std::unique_ptr<BucketCodec> codec,
                   size_t bucket_bytes)
    : comm_(comm), params_(std::move(params)), mode_(SyncMode::Bucketed), codec_(std::move(codec)) {
  check_params();
  plan_buckets(bucket_bytes);
  codec_->plan(params_, bucket_params_, offset_of_);
}

void GradSync::check_params() {
  for (auto& [n, p] : params_) {
    ENGINE_CHECK(p.dtype() == DType::F32, "gradient sync: parameter '", n, "' must be float32");
    ENGINE_CHECK(p.device() == params_.front().second.device(), "gradient sync: parameter '", n,
                 "' is on ", p.device().str(), ", the first on ",
                 params_.front().second.device().str(), ": one device per rank");
  }
  if (!params_.empty()) device_ = params_.front().second.device();
}

void GradSync::plan_buckets(size_t bucket_bytes) {
  ENGINE_CHECK(bucket_bytes >= 4, "gradient sync: bucket size ", bucket_bytes,
               " bytes is too small");
  // Reverse order: the last layer's gradients are final first during backward.
  bucket_of_.resize(params_.size());
  offset_of_.resize(params_.size());
  packed_.assign(params_.size(), 0);
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
    // A codec works on host memory: its buckets live there whatever the parameters' device.
    b->flat =
        Tensor::zeros({static_cast<int64_t>(count)}, DType::F32, codec_ ? Device::cpu() : device_);
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
  step_ = step;
  armed_ = true;
  std::fill(packed_.begin(), packed_.end(), 0);
  for (size_t k = 0; k < buckets_.size(); ++k) {
    buckets_[k]->pending = bucket_params_[k].size();
    buckets_[k]->launched = false;
    buckets_[k]->work = Work();
    buckets_[k]->queued = cuda::Event();
  }
}

int64_t ring_send_bytes(int64_t nbytes, int world) {
  return world > 1 ? 2 * (world - 1) * nbytes / world : 0;
}

int64_t GradSync::bytes_per_step(int64_t step) const {
  const int world = comm_.size();
  if (codec_) {
    int64_t sum = 0;
    for (size_t k = 0; k < buckets_.size(); ++k)
      sum += codec_->bytes(k, static_cast<size_t>(buckets_[k]->flat.numel()), step, world);
    return sum;
  }
  int64_t count = 0;
  for (const auto& [name, p] : params_) count += p.numel();
  return ring_send_bytes(count * 4, world);
}

void GradSync::on_grad_ready(size_t i, const Tensor& g) {
  if (!armed_) return;
  pack(i, g);
  Bucket* b = buckets_[bucket_of_[i]];
  b->pending -= 1;
  if (b->pending == 0) launch(bucket_of_[i]);
}

void GradSync::pack(size_t i, const Tensor& g) {
  Tensor slot = buckets_[bucket_of_[i]]->flat.flat_slice(static_cast<int64_t>(offset_of_[i]),
                                                         params_[i].second.numel());
  packed_[i] = 1;
  if (!g.defined()) {
    slot.fill_(0.0f);  // no gradient this step: zeros stand in
  } else if (codec_) {
    sync_guard::Allow host_staged;  // a CUDA gradient is read back into the codec's host bucket
    slot.copy_from(g);
  } else {
    slot.copy_from(g);  // on a GPU queued on the compute stream, behind the kernel that made g
  }
}

void GradSync::launch(size_t k) {
  Bucket* b = buckets_[k];
  b->launched = true;
  if (codec_) return launch_codec(k);
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

// The codec's work on the communication thread; a CUDA gradient reached the host bucket by its
// hook's copy, so nothing here touches the device.
void GradSync::launch_codec(size_t k) {
  Bucket* b = buckets_[k];
  BucketCodec* codec = codec_.get();
  float* data = b->flat.data<float>();
  const size_t count = static_cast<size_t>(b->flat.numel());
  const int64_t step = step_;
  b->work = comm_.submit([codec, data, count, k, step, what = codec->name()](Communicator& c) {
    if (trace::enabled()) trace::set_thread_name("comm");
    trace::Scope ts(what, "comm");
    ts.arg("bucket", k).arg("bytes", count * 4);
    codec->reduce(c, k, data, count, step);
  });
}

void GradSync::finish_bucketed() {
  // Buckets not launched during backward (no hooks, or a parameter without a gradient): what
  // was not packed is packed now (zeros for no gradient), then they launch in order.
  for (size_t k = 0; k < buckets_.size(); ++k) {
    if (buckets_[k]->launched) continue;
    for (size_t i : bucket_params_[k])
      if (!packed_[i]) pack(i, params_[i].second.grad());
    launch(k);
  }
  {
    trace::Scope ts("allreduce wait", "comm");
    for (Bucket* b : buckets_) {
      if (b->queued.defined()) {
        b->queued.block(cuda::Stream::Compute);  // the device waits, not the host
        b->queued = cuda::Event();
      } else {
        b->work.wait();
      }
    }
    if (device_.is_cuda() && !codec_) comm_.check_queued();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    if (!p.grad().defined()) p.set_grad(Tensor::empty(p.shape(), DType::F32, p.device()));
    p.grad().copy_from(
        buckets_[bucket_of_[i]]->flat.flat_slice(static_cast<int64_t>(offset_of_[i]), p.numel()));
  }
}

void GradSync::finish() {
  armed_ = false;
  if (mode_ == SyncMode::Bucketed) return finish_bucketed();
  const int world = comm_.size();
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
