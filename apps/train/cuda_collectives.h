// apps/train/cuda_collectives.h: the CUDA collectives of a training rank (--backend, --cuda-ring).
#pragma once
#include <string>

#include "apps/train/config.h"
#include "comm/communicator.h"
#include "core/device.h"

namespace engine::apps {

// Attaches how comm moves CUDA tensors when this rank trains on dev: NCCL, the CUDA IPC ring or
// pinned staging. Returns what was chosen for the World line ("nccl", "ipc", "staged", "staged
// (why not ipc)"), or "" on the CPU. Every rank calls it: the ranks agree on the device kind and
// on whether CUDA IPC can be used. Throws engine::Error on a mismatch or an impossible choice.
// --backend mpi puts every collective on MPI, CPU ones included ("mpi (staged ...)" on a GPU).
std::string attach_cuda_collectives(const TrainConfig& c, comm::Communicator& comm, Device dev);

}  // namespace engine::apps
