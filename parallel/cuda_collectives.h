// parallel/cuda_collectives.h: how a training rank's collectives move CUDA tensors (NCCL, the CUDA
// IPC ring or pinned staging over the host transports), or MPI for every collective, with the
// fallbacks when the preferred path cannot run.
#pragma once
#include <string>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/communicator.h"
#include "core/device.h"
#include "core/error.h"

namespace engine::parallel {

enum class CollectiveBackend { Ring, Nccl, Mpi };
// The ring's path for CUDA tensors: Auto takes the IPC ring when every rank is on one host and
// CUDA IPC works there, else staging; Ipc refuses to fall back.
enum class CudaRing { Auto, Staged, Ipc };

struct CudaCollectiveOptions {
  CollectiveBackend backend = CollectiveBackend::Ring;
  CudaRing cuda_ring = CudaRing::Auto;
  comm::IpcProtocol protocol = comm::IpcRingOptions{}.protocol;  // the IPC ring's
  int channels = 0;  // the IPC ring's channels (Simple's thread blocks); 0: its default
  double timeout_s = 300;
};

// What the ranks cannot run, in the library's words; `detail` is the cause alone, for the app
// to word the message with the setting that chose it.
class CollectivesRefused : public Error {
 public:
  enum class Why {
    MixedDevices,  // some ranks on a GPU, some on the CPU
    NcclOnCpu,     // NCCL asked for, this rank on the CPU (detail: why no GPU)
    NoIpc,         // the IPC ring asked for and impossible here (detail: why)
  };
  CollectivesRefused(Why why, std::string detail, const std::string& message)
      : Error(message), why(why), detail(std::move(detail)) {}
  Why why;
  std::string detail;
};

// Attaches how comm moves CUDA tensors when this rank trains on dev. Returns what was chosen for
// the World line ("nccl", "ipc", "staged", "staged (why not ipc)"), or "" on the CPU. Every rank
// calls it: the ranks agree on the device kind and on whether CUDA IPC can be used. Throws
// CollectivesRefused on a mismatch or an impossible choice. Mpi puts every collective on MPI,
// CPU ones included ("mpi (staged ...)" on a GPU).
std::string attach_cuda_collectives(const CudaCollectiveOptions& o, comm::Communicator& comm,
                                    Device dev);

}  // namespace engine::parallel
