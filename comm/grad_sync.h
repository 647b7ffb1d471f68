// comm/grad_sync.h: data-parallel gradient synchronisation: after backward every rank's gradients
// equal the mean over ranks. Three ways, as in the tutorials and DDP:
//   AllReduce        one all_reduce per parameter after backward, then divide (average_gradients)
//   ReduceBroadcast  reduce to rank 0, divide there, broadcast (the master-slave variant)
//   Bucketed         DDP's way: gradients packed into flat buckets in reverse parameter order
//                    (the order backward makes them); a bucket's all_reduce starts on the
//                    communication thread as soon as its last gradient is final (parameter hook),
//                    overlapping the rest of backward; finish() waits and unpacks.
// It sees tensors and hooks only, never a model. On a GPU the buckets live on the device: a
// gradient is packed by a copy queued on the compute stream, the bucket's all_reduce waits for an
// event recorded after its last copy (not for the rest of backward) and runs on the communicator's
// CUDA path. With NCCL it is queued on the comm stream straight from the gradient hook and
// finish() only makes the compute stream wait for it (events, no host wait; NCCL's watchdog
// bounds it). The IPC ring and the staged path run on the communication thread, which waits for
// each bucket on the host while backward goes on; finish() waits for that thread.
//
// The compressing reducers (comm/half_grad_sync.h, comm/powersgd.h) are this Bucketed engine with
// another bucket codec: the same layout and hooks, but what a bucket's work is on the
// communication thread changes (16-bit all_reduce; PowerSGD's P and Q). Their buckets live on the
// host: a CUDA gradient is copied there by its hook.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "core/tensor.h"

namespace engine::comm {

// DDP's default bucket_cap_mb (25 MiB), for reducers constructed without a size.
constexpr size_t kDefaultBucketBytes = size_t{25} << 20;

// Bytes one rank sends to all_reduce `nbytes` with the ring schedule: 2 (W - 1) / W of them.
int64_t ring_send_bytes(int64_t nbytes, int world);

// A bucket's work between packing and unpacking, for reducers that change what travels. It runs
// on the communication thread, one bucket at a time in launch order (the same on every rank),
// over the bucket's float32 gradients packed on the host, and leaves their reduced mean (or its
// approximation) in place.
class BucketCodec {
 public:
  virtual ~BucketCodec() = default;
  // Once, before any step: per bucket the indices into params (reverse parameter order), and
  // each parameter's element offset inside its bucket.
  virtual void plan(const NamedParams& params, const std::vector<std::vector<size_t>>& buckets,
                    const std::vector<size_t>& offset_of) = 0;
  // flat: bucket `bucket`'s `count` packed gradients of optimizer step `step`.
  virtual void reduce(Communicator& c, size_t bucket, float* flat, size_t count, int64_t step) = 0;
  // Bytes this rank sends for bucket `bucket` of `count` elements at `step`.
  virtual int64_t bytes(size_t bucket, size_t count, int64_t step, int world) const = 0;
  // For traces and GradReducer::name().
  virtual std::string name() const = 0;
};

enum class SyncMode { AllReduce, ReduceBroadcast, Bucketed };
SyncMode sync_mode_from_name(const std::string& s);  // allreduce | reduce-broadcast | bucketed
const char* sync_mode_name(SyncMode m);

class GradSync : public GradReducer {
 public:
  // params: the model's parameters, in registration (forward) order. bucket_bytes caps a bucket.
  GradSync(Communicator& comm, NamedParams params, SyncMode mode, size_t bucket_bytes);
  // Bucketed, each bucket's work done by `codec` (owned) instead of a float32 all_reduce.
  GradSync(Communicator& comm, NamedParams params, std::unique_ptr<BucketCodec> codec,
           size_t bucket_bytes);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Before backward of optimizer step `step`: arms the hooks.
  void begin(int64_t step = 0) override;
  // After backward: afterwards each parameter's grad is the mean over ranks. A parameter
  // without a gradient on this step counts as zeros (every rank must agree on which).
  void finish() override;
  // The ring schedule's bytes for one step: 2 (W - 1) / W of every float32 gradient, or what
  // the codec sends.
  int64_t bytes_per_step(int64_t step) const override;
  std::string name() const override { return codec_ ? codec_->name() : sync_mode_name(mode_); }

  // Bucket layout (tests, traces): per bucket, the indices into params.
  const std::vector<std::vector<size_t>>& buckets() const { return bucket_params_; }

 protected:
  BucketCodec* codec() const { return codec_.get(); }
  Communicator& communicator() const { return comm_; }

 private:
  struct Bucket;
  void check_params();
  void plan_buckets(size_t bucket_bytes);
  void on_grad_ready(size_t param, const Tensor& grad);
  void pack(size_t param, const Tensor& grad);
  void launch(size_t bucket);
  void launch_codec(size_t bucket);
  void finish_bucketed();

  Communicator& comm_;
  NamedParams params_;
  Device device_ = Device::cpu();  // of every parameter
  SyncMode mode_;
  std::unique_ptr<BucketCodec> codec_;  // null: float32 all_reduce (avg) per bucket
  int64_t step_ = 0;                    // begin()'s, for the codec
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<Bucket*> buckets_;
  std::vector<size_t> bucket_of_, offset_of_;  // per parameter
  std::vector<char> packed_;                   // per parameter: packed this step
  bool armed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Copies rank root's tensors to every rank (parameters and buffers at start; buffers each step):
// one broadcast per device, the device's tensors packed into one byte buffer.
void broadcast_tensors(Communicator& comm, const NamedParams& tensors, int root = 0);

}  // namespace engine::comm
