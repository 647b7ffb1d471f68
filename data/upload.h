// data/upload.h: BatchUploader puts the loader's batches on the training device.
//
// On the CPU a batch simply becomes two tensors. On a GPU it goes through one of two slots, each a
// pinned host buffer and a device buffer (images and labels): stage() copies the batch into the
// slot's pinned buffer and queues the upload on the device's copy stream, behind an event that
// says the compute work of the batch that last used the slot is done; take() makes the compute
// stream wait for the upload and hands out tensors over the slot's device buffer; done() records
// that the step's compute work on them has been queued. With the loop
//   slot = stage(batch 0)
//   repeat: t = take(slot); slot = stage(next batch); <queue step on t>; done(t.slot)
// the next batch uploads while the current one computes, and nothing waits on the host except
// for the pinned buffer written two batches ago (long finished).
// With a DeviceDataset (data on the device, data/device_data.h) only the batch's indices travel,
// through the same slots; take() queues the gather of images and labels on the compute stream.
#pragma once
#include <array>
#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/tensor.h"
#include "data/batch.h"
#include "data/device_data.h"

namespace engine::cuda {
class Event;
}

namespace engine::data {

struct DeviceBatch {
  Tensor images;  // (B, 1, H, W) float32
  Tensor labels;  // (B) int64
  int64_t size = 0;
  int slot = 0;
};

class BatchUploader {
 public:
  // Batches of at most max_batch images of rows x cols. on_device: the split on `device`, whose
  // batches come as indices (BatchLoader::set_indices_only); it must outlive the uploader.
  BatchUploader(Device device, int64_t max_batch, int64_t rows, int64_t cols,
                const DeviceDataset* on_device = nullptr);
  ~BatchUploader();
  BatchUploader(const BatchUploader&) = delete;
  BatchUploader& operator=(const BatchUploader&) = delete;

  // Starts moving b to the device; returns its slot. Throws engine::Error naming the field when b
  // does not fit (size, rows, cols).
  int stage(const Batch& b);
  // The staged batch as tensors; device work queued after this call sees the upload.
  DeviceBatch take(int slot);
  // The compute work that reads this slot's tensors has all been queued.
  void done(int slot);

 private:
  struct Slot;
  void upload(Slot& s, const Batch& b);

  Device device_;
  int64_t max_batch_, rows_, cols_;
  const DeviceDataset* data_;
  int next_ = 0;
  std::array<std::unique_ptr<Slot>, 2> slots_;
};

}  // namespace engine::data
