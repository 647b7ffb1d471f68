// data/device_data.cpp: see device_data.h.
#include "data/device_data.h"

#include <vector>

#include "core/error.h"
#include "kernels/cpu/gather.h"
#include "kernels/cuda/ops.h"
#include "kernels/dispatch.h"

namespace engine::data {

size_t device_split_nbytes(const MnistSplit& split) {
  return static_cast<size_t>(split.count) *
         (static_cast<size_t>(split.image_numel()) * sizeof(float) + sizeof(int64_t));
}

DataOnDeviceChoice choose_data_on_device(const std::string& mode, bool cuda, size_t need,
                                         size_t free_bytes) {
  DataOnDeviceChoice c;
  if (mode == "off") {
    c.reason = "turned off";
    return c;
  }
  ENGINE_CHECK(mode == "auto" || mode == "on", "data on device must be auto, on or off, got '",
               mode, "'");
  if (!cuda) {
    c.reason = "the device is the CPU";
    c.refused = mode == "on";
    return c;
  }
  if (mode == "auto" && need > free_bytes / 4) {
    c.reason = detail::concat("the training set's ", need >> 20, " MiB exceed a quarter of the ",
                              free_bytes >> 20, " MiB free");
    return c;
  }
  c.on = true;  // on: the caller asked; an allocation that fails says out of memory itself
  return c;
}

DeviceDataset::DeviceDataset(const MnistSplit& split, Device dev) {
  const int64_t numel = split.image_numel();
  std::vector<float> images(static_cast<size_t>(split.count * numel));
  normalize_into(split.images.data(), images.data(), split.count * numel);
  std::vector<int64_t> labels(split.labels.begin(), split.labels.end());
  images_ = Tensor::from_vector(images, {split.count, 1, split.rows, split.cols}, dev);
  labels_ = Tensor::from_vector_i64(labels, {split.count}, dev);
}

void DeviceDataset::check_indices(const int64_t* idx, int64_t n) const {
  for (int64_t i = 0; i < n; ++i)
    ENGINE_CHECK(idx[i] >= 0 && idx[i] < count(), "DeviceDataset: index ", idx[i], " at position ",
                 i, " is outside 0..", count() - 1);
}

// The CPU's gather checks its indices again; the device's takes them as checked.
void DeviceDataset::gather(const Tensor& idx, int64_t n, Tensor* images, Tensor* labels) const {
  const int64_t numel = rows() * cols();
  ENGINE_CHECK(
      idx.device() == device() && images->device() == device() && labels->device() == device(),
      "DeviceDataset::gather: tensors on another device than the data's ", device().str());
  ENGINE_CHECK(idx.numel() >= n && images->numel() >= n * numel && labels->numel() >= n,
               "DeviceDataset::gather: ", n, " samples do not fit the tensors given");
  const Device dev = device();
  if (dev.is_cpu()) {
    kernels::cpu::gather_rows_f32(images_.data<float>(), count(), numel, idx.data<int64_t>(), n,
                                  images->data<float>());
    kernels::cpu::gather_rows_i64(labels_.data<int64_t>(), count(), 1, idx.data<int64_t>(), n,
                                  labels->data<int64_t>());
    return;
  }
  kernels::cuda::gather_rows_f32(dev.index, images_.data<float>(), numel, idx.data<int64_t>(), n,
                                 images->data<float>());
  kernels::cuda::gather_rows_i64(dev.index, labels_.data<int64_t>(), 1, idx.data<int64_t>(), n,
                                 labels->data<int64_t>());
}

}  // namespace engine::data
