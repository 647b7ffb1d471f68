// data/upload.cpp: BatchUploader (see upload.h).
#include "data/upload.h"

#include <cstring>

#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::data {

struct BatchUploader::Slot {
  // CPU: the tensors of the staged batch. GPU: device buffers (max_batch), views handed out.
  Tensor images, labels;
  int64_t size = 0;
  // GPU only.
  float* host_images = nullptr;  // pinned (max_batch, rows, cols)
  int64_t* host_labels = nullptr;
  cuda::Event uploaded;  // copy stream: the upload from the pinned buffers is done
  cuda::Event released;  // compute stream: the last step reading the device buffers
  bool staged = false;
};

BatchUploader::BatchUploader(Device device, int64_t max_batch, int64_t rows, int64_t cols)
    : device_(device), max_batch_(max_batch), rows_(rows), cols_(cols) {
  ENGINE_CHECK(max_batch >= 1 && rows >= 1 && cols >= 1, "BatchUploader: batch ", max_batch, " of ",
               rows, " x ", cols, " images");
  for (auto& s : slots_) {
    s = std::make_unique<Slot>();
    if (device_.is_cpu()) continue;
    s->images = Tensor::empty({max_batch, 1, rows, cols}, DType::F32, device_);
    s->labels = Tensor::empty({max_batch}, DType::I64, device_);
    s->host_images = static_cast<float*>(cuda::alloc_pinned(s->images.nbytes(), device_.index));
    s->host_labels = static_cast<int64_t*>(cuda::alloc_pinned(s->labels.nbytes(), device_.index));
    // The device blocks may have served compute work still queued (the caching allocator).
    s->released = cuda::Event::record(device_.index, cuda::Stream::Compute);
  }
}

BatchUploader::~BatchUploader() {
  for (auto& s : slots_) {
    if (!s || device_.is_cpu()) continue;
    try {
      // The copy stream may still read the pinned buffers.
      s->uploaded.synchronize();
      cuda::free_pinned(s->host_images, device_.index);
      cuda::free_pinned(s->host_labels, device_.index);
    } catch (const std::exception&) {
      // a destructor never throws; at exit the driver may be gone
    }
  }
}

int BatchUploader::stage(const Batch& b) {
  ENGINE_CHECK(b.size >= 0 && b.size <= max_batch_, "BatchUploader: batch of ", b.size,
               " images, slots hold ", max_batch_);
  ENGINE_CHECK(b.size == 0 || (b.rows == rows_ && b.cols == cols_), "BatchUploader: images of ",
               b.rows, " x ", b.cols, ", expected ", rows_, " x ", cols_);
  ENGINE_CHECK(static_cast<int64_t>(b.images.size()) == b.size * rows_ * cols_ &&
                   static_cast<int64_t>(b.labels.size()) == b.size,
               "BatchUploader: batch of ", b.size, " has ", b.images.size(), " pixels and ",
               b.labels.size(), " labels");
  const int k = next_;
  next_ ^= 1;
  Slot& s = *slots_[k];
  ENGINE_CHECK(!s.staged, "BatchUploader: slot ", k, " staged twice without take()");
  s.size = b.size;
  s.staged = true;
  if (device_.is_cpu()) {
    s.images = Tensor::from_vector(b.images, {b.size, 1, rows_, cols_});
    s.labels = Tensor::from_vector_i64(b.labels, {b.size});
    return k;
  }
  const int dev = device_.index;
  s.uploaded.synchronize();  // the pinned buffers' previous upload (two batches ago)
  std::memcpy(s.host_images, b.images.data(), b.images.size() * sizeof(float));
  std::memcpy(s.host_labels, b.labels.data(), b.labels.size() * sizeof(int64_t));
  s.released.block(cuda::Stream::Copy);
  cuda::copy_async(s.images.raw_data(), device_, s.host_images, Device::cpu(),
                   b.images.size() * sizeof(float), dev, cuda::Stream::Copy);
  cuda::copy_async(s.labels.raw_data(), device_, s.host_labels, Device::cpu(),
                   b.labels.size() * sizeof(int64_t), dev, cuda::Stream::Copy);
  s.uploaded = cuda::Event::record(dev, cuda::Stream::Copy);
  return k;
}

DeviceBatch BatchUploader::take(int slot) {
  ENGINE_CHECK(slot == 0 || slot == 1, "BatchUploader: no slot ", slot);
  Slot& s = *slots_[slot];
  ENGINE_CHECK(s.staged, "BatchUploader: take() of slot ", slot, " with no batch staged");
  s.staged = false;
  DeviceBatch d;
  d.size = s.size;
  d.slot = slot;
  if (device_.is_cpu()) {
    d.images = s.images;
    d.labels = s.labels;
    return d;
  }
  s.uploaded.block(cuda::Stream::Compute);
  d.images = s.images.flat_slice(0, s.size * rows_ * cols_).view({s.size, 1, rows_, cols_});
  d.labels = s.labels.flat_slice(0, s.size);
  return d;
}

void BatchUploader::done(int slot) {
  ENGINE_CHECK(slot == 0 || slot == 1, "BatchUploader: no slot ", slot);
  if (device_.is_cuda())
    slots_[slot]->released = cuda::Event::record(device_.index, cuda::Stream::Compute);
}

}  // namespace engine::data
