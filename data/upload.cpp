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
  // GPU with a DeviceDataset: the batch's indices, pinned and on the device.
  Tensor indices;
  int64_t* host_indices = nullptr;
  cuda::Event uploaded;  // copy stream: the upload from the pinned buffers is done
  cuda::Event released;  // compute stream: the last step reading the device buffers
  bool staged = false;
};

BatchUploader::BatchUploader(Device device, int64_t max_batch, int64_t rows, int64_t cols,
                             const DeviceDataset* on_device)
    : device_(device), max_batch_(max_batch), rows_(rows), cols_(cols), data_(on_device) {
  ENGINE_CHECK(max_batch >= 1 && rows >= 1 && cols >= 1, "BatchUploader: batch ", max_batch, " of ",
               rows, " x ", cols, " images");
  ENGINE_CHECK(
      !data_ || (data_->device() == device && data_->rows() == rows && data_->cols() == cols),
      "BatchUploader: the data on ", data_ ? data_->device().str() : "", " is not ", rows, " x ",
      cols, " images on ", device.str());
  for (auto& s : slots_) {
    s = std::make_unique<Slot>();
    if (device_.is_cpu()) continue;
    s->images = Tensor::empty({max_batch, 1, rows, cols}, DType::F32, device_);
    s->labels = Tensor::empty({max_batch}, DType::I64, device_);
    s->host_images = static_cast<float*>(cuda::alloc_pinned(s->images.nbytes(), device_.index));
    s->host_labels = static_cast<int64_t*>(cuda::alloc_pinned(s->labels.nbytes(), device_.index));
    if (data_) {
      s->indices = Tensor::empty({max_batch}, DType::I64, device_);
      s->host_indices =
          static_cast<int64_t*>(cuda::alloc_pinned(s->indices.nbytes(), device_.index));
    }
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
      cuda::free_pinned(s->host_indices, device_.index);
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
  ENGINE_CHECK(data_ || (static_cast<int64_t>(b.images.size()) == b.size * rows_ * cols_ &&
                         static_cast<int64_t>(b.labels.size()) == b.size),
               "BatchUploader: batch of ", b.size, " has ", b.images.size(), " pixels and ",
               b.labels.size(), " labels");
  ENGINE_CHECK(!data_ || static_cast<int64_t>(b.indices.size()) == b.size,
               "BatchUploader: batch of ", b.size, " has ", b.indices.size(), " indices");
  const int k = next_;
  next_ ^= 1;
  Slot& s = *slots_[k];
  ENGINE_CHECK(!s.staged, "BatchUploader: slot ", k, " staged twice without take()");
  s.size = b.size;
  s.staged = true;
  if (data_) data_->check_indices(b.indices.data(), b.size);
  if (device_.is_cpu() && data_) {
    s.indices = Tensor::from_vector_i64(b.indices, {b.size});
    return k;
  }
  if (device_.is_cpu()) {
    s.images = Tensor::from_vector(b.images, {b.size, 1, rows_, cols_});
    s.labels = Tensor::from_vector_i64(b.labels, {b.size});
    return k;
  }
  upload(s, b);
  return k;
}

// On the copy stream, from the slot's pinned buffers: the batch, or its indices alone.
void BatchUploader::upload(Slot& s, const Batch& b) {
  const int dev = device_.index;
  s.uploaded.synchronize();  // the pinned buffers' previous upload (two batches ago)
  if (data_) {
    std::memcpy(s.host_indices, b.indices.data(), b.indices.size() * sizeof(int64_t));
    s.released.block(cuda::Stream::Copy);
    cuda::copy_async(s.indices.raw_data(), device_, s.host_indices, Device::cpu(),
                     b.indices.size() * sizeof(int64_t), dev, cuda::Stream::Copy);
    s.uploaded = cuda::Event::record(dev, cuda::Stream::Copy);
    return;
  }
  std::memcpy(s.host_images, b.images.data(), b.images.size() * sizeof(float));
  std::memcpy(s.host_labels, b.labels.data(), b.labels.size() * sizeof(int64_t));
  s.released.block(cuda::Stream::Copy);
  cuda::copy_async(s.images.raw_data(), device_, s.host_images, Device::cpu(),
                   b.images.size() * sizeof(float), dev, cuda::Stream::Copy);
  cuda::copy_async(s.labels.raw_data(), device_, s.host_labels, Device::cpu(),
                   b.labels.size() * sizeof(int64_t), dev, cuda::Stream::Copy);
  s.uploaded = cuda::Event::record(dev, cuda::Stream::Copy);
}

DeviceBatch BatchUploader::take(int slot) {
  ENGINE_CHECK(slot == 0 || slot == 1, "BatchUploader: no slot ", slot);
  Slot& s = *slots_[slot];
  ENGINE_CHECK(s.staged, "BatchUploader: take() of slot ", slot, " with no batch staged");
  s.staged = false;
  DeviceBatch d;
  d.size = s.size;
  d.slot = slot;
  if (data_) {
    if (device_.is_cpu()) {
      s.images = Tensor::empty({max_batch_, 1, rows_, cols_}, DType::F32, device_);
      s.labels = Tensor::empty({max_batch_}, DType::I64, device_);
    } else {
      s.uploaded.block(cuda::Stream::Compute);
    }
    data_->gather(s.indices, s.size, &s.images, &s.labels);  // on the compute stream
    d.images = s.images.flat_slice(0, s.size * rows_ * cols_).view({s.size, 1, rows_, cols_});
    d.labels = s.labels.flat_slice(0, s.size);
    return d;
  }
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
