// core/device_choice.cpp: pick_device (see device_choice.h).
#include "core/device_choice.h"

#include "core/error.h"

namespace engine {

DeviceChoice pick_device(const std::string& device, int visible, const std::string& why_none,
                         int local_rank, int local_size, int rank) {
  if (device == "cpu") return {Device::cpu(), ""};
  if (visible <= 0) {
    ENGINE_CHECK(device != "cuda", "--device cuda: ", why_none);
    return {Device::cpu(), why_none + ": training on cpu"};
  }
  if (local_rank < visible) return {Device::cuda(local_rank), ""};
  if (visible == 1) return {Device::cuda(0), ""};
  ENGINE_FAIL("rank ", rank, " is local rank ", local_rank, " of ", local_size,
              " on this host but sees ", visible,
              " CUDA devices: give each rank one GPU (CUDA_VISIBLE_DEVICES per rank, Slurm "
              "--gpus-per-task=1) or start at most ",
              visible, " ranks per host");
}

}  // namespace engine
