// comm/backends/staged/cuda_slots_absent.cpp: make_cuda_slots in a build without CUDA, where no
// tensor is ever on a GPU.
#ifndef ENGINE_WITH_CUDA

#include "comm/backends/staged/cuda_slots.h"
#include "core/error.h"

namespace engine::comm::staged {

std::unique_ptr<DeviceSlots> make_cuda_slots(int device, int slots, size_t slot_bytes) {
  ENGINE_FAIL("the staged pipeline on cuda:", device,
              ": CUDA is not built in (configure with -DENGINE_CUDA=ON on a machine with nvcc)");
}

}  // namespace engine::comm::staged

#endif  // ENGINE_WITH_CUDA
