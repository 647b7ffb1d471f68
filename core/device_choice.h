// core/device_choice.h: which device a rank of `train` works on, as a pure function of what it
// sees (tested on the CPU: tests/core/test_device_choice.cpp).
#pragma once
#include <string>

#include "core/device.h"

namespace engine {

struct DeviceChoice {
  Device device;
  std::string notice;  // for rank 0 to print ("" when none): why it trains on the cpu
};

// The device asked for (auto|cpu|cuda) for local rank `local_rank` of `local_size` ranks on this
// host, which sees `visible` CUDA devices (`why_none`: cuda_unavailable_reason() when it sees
// none):
//   cpu                    -> cpu
//   no device              -> cpu with a notice (auto), an error naming why_none (cuda)
//   visible > local_rank   -> cuda:local_rank (every rank sees every GPU of the host)
//   visible == 1           -> cuda:0: one GPU per task (CUDA_VISIBLE_DEVICES set per rank by the
//                             launcher, or Slurm's one GPU per task), or ranks sharing the one GPU
//   otherwise              -> an engine::Error naming the rank, its local rank and the count
DeviceChoice pick_device(const std::string& device, int visible, const std::string& why_none,
                         int local_rank, int local_size, int rank);

}  // namespace engine
