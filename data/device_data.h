// data/device_data.h: data on the device: the training split uploaded once to the training device
// (images normalised on the host first, so a batch gathered there equals the host's bit for bit),
// each batch then gathered on the device from its indices (kernels/gather.h), which are all that
// travels per step (data/upload.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/tensor.h"
#include "data/mnist.h"

namespace engine::data {

// Bytes the split takes on the device: float32 images and int64 labels.
size_t device_split_nbytes(const MnistSplit& split);

// mode: auto|on|off. cuda: the training device is a GPU; need: device_split_nbytes; free_bytes:
// the device's free memory. auto: on for a GPU when need fits in a quarter of free_bytes. on where
// it cannot be (the CPU) is refused: the caller exits 2 naming its option.
struct DataOnDeviceChoice {
  bool on = false;
  bool refused = false;
  std::string reason;  // why off; "" when on
};
DataOnDeviceChoice choose_data_on_device(const std::string& mode, bool cuda, size_t need,
                                         size_t free_bytes);

class DeviceDataset {
 public:
  DeviceDataset(const MnistSplit& split, Device dev);

  int64_t count() const { return labels_.numel(); }
  Device device() const { return images_.device(); }
  int64_t rows() const { return images_.size(2); }
  int64_t cols() const { return images_.size(3); }
  // images (n, 1, H, W), labels (n) = the samples idx[0 .. n) (idx: int64 on device()), queued on
  // the device's compute stream. The indices are not checked here (on a GPU they could not be
  // without a host wait): the caller checks them on the host (check_indices).
  void gather(const Tensor& idx, int64_t n, Tensor* images, Tensor* labels) const;
  // Throws engine::Error naming the position of an index outside 0 .. count()-1.
  void check_indices(const int64_t* idx, int64_t n) const;

 private:
  Tensor images_;  // (N, 1, H, W) float32, normalised
  Tensor labels_;  // (N) int64
};

}  // namespace engine::data
