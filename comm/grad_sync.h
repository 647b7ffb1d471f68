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
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "core/tensor.h"

namespace engine::comm {

enum class SyncMode { AllReduce, ReduceBroadcast, Bucketed };
SyncMode sync_mode_from_name(const std::string& s);  // allreduce | reduce-broadcast | bucketed
const char* sync_mode_name(SyncMode m);

class GradSync : public GradReducer {
 public:
  // params: the model's parameters, in registration (forward) order. bucket_bytes caps a bucket.
  GradSync(Communicator& comm, NamedParams params, SyncMode mode, size_t bucket_bytes);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Before backward: arms the hooks for this step.
  void begin(int64_t step = 0) override;
  // After backward: afterwards each parameter's grad is the mean over ranks. A parameter
  // without a gradient on this step counts as zeros (every rank must agree on which).
  void finish() override;
  // The ring schedule's bytes for one step: 2 (W - 1) / W of every float32 gradient.
  int64_t bytes_per_step(int64_t step) const override;
  std::string name() const override { return sync_mode_name(mode_); }

  // Bucket layout (tests, traces): per bucket, the indices into params.
  const std::vector<std::vector<size_t>>& buckets() const { return bucket_params_; }

 private:
  struct Bucket;
  void on_grad_ready(size_t param, const Tensor& grad);
  void launch(size_t bucket);

  Communicator& comm_;
  NamedParams params_;
  Device device_ = Device::cpu();  // of every parameter
  SyncMode mode_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<Bucket*> buckets_;
  std::vector<size_t> bucket_of_, offset_of_;  // per parameter
  bool armed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Copies rank root's tensors to every rank (parameters and buffers at start; buffers each step):
// one broadcast per device, the device's tensors packed into one byte buffer.
void broadcast_tensors(Communicator& comm, const NamedParams& tensors, int root = 0);

}  // namespace engine::comm
