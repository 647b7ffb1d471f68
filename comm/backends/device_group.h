// comm/backends/device_group.h: what the device communicators (comm/backends/nccl/nccl_group.h,
// comm/backends/cuda_ipc/cuda_ipc_ring.h) share: this rank's place among the W ranks, its GPU, and
// whether an error broke the group (then every later call throws).
#pragma once

namespace engine::comm {

class DeviceGroup {
 public:
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return world_; }
  int device() const { return device_; }
  bool broken() const { return broken_; }

 protected:
  DeviceGroup(int rank, int world, int device) : rank_(rank), world_(world), device_(device) {}
  ~DeviceGroup() = default;

  int rank_ = 0, world_ = 1, device_ = 0;
  bool broken_ = false;
};

}  // namespace engine::comm
