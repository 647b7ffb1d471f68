// apps/train/cuda_collectives.cpp: how train's collectives move CUDA tensors (NCCL, the CUDA IPC
// ring or pinned staging over the host transports), and --backend mpi (every collective on MPI).
#include "apps/train/cuda_collectives.h"

#include <memory>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/backends/cuda_ipc/ipc_peers.h"
#include "comm/backends/mpi/mpi_backend.h"
#include "comm/backends/mpi/mpi_world.h"
#include "comm/backends/nccl/nccl_group.h"
#include "core/error.h"

namespace engine::apps {

namespace {

// --backend mpi: every collective through MPI, those of CUDA tensors staged through host memory.
std::string attach_mpi(comm::Communicator& comm, Device dev, double timeout_s) {
  const comm::Millis timeout(static_cast<int64_t>(timeout_s * 1000));
  comm.set_backend(DeviceKind::CPU, comm::make_mpi_backend(comm.rank(), comm.size(), timeout));
  if (dev.is_cpu()) return "";
  comm.set_backend(DeviceKind::CUDA, comm::make_mpi_backend(comm.rank(), comm.size(), timeout));
  return "mpi (staged through host memory)";
}

}  // namespace

// How this rank's collectives move CUDA tensors (--backend, --cuda-ring); "" on the CPU. Every
// rank calls it: the ranks agree on the device kind and on whether CUDA IPC can be used.
std::string attach_cuda_collectives(const TrainConfig& c, comm::Communicator& comm, Device dev) {
  // One MIN over [on cuda, -on cuda]: the second is minus the MAX of "on cuda".
  const int64_t on_cuda = dev.is_cuda() ? 1 : 0;
  int64_t mins[2] = {on_cuda, -on_cuda};
  comm.all_reduce(mins, 2, DType::I64, comm::ReduceOp::Min);
  ENGINE_CHECK(mins[0] == -mins[1], "rank ", comm.rank(), " trains on ", dev.str(),
               " but other ranks train on ", dev.is_cuda() ? "the cpu" : "a GPU",
               ": every rank needs a GPU (or pass --device cpu)");
  if (c.backend == "mpi") return attach_mpi(comm, dev, c.timeout_s);
  if (dev.is_cpu()) {
    ENGINE_CHECK(c.backend != "nccl",
                 "--backend nccl reduces CUDA tensors and this rank trains "
                 "on the cpu (",
                 cuda_unavailable_reason(), "): use --backend ring");
    return "";
  }
  const comm::Millis timeout(static_cast<int64_t>(c.timeout_s * 1000));
  ENGINE_CHECK(comm.store() != nullptr, "rank ", comm.rank(),
               ": no rendezvous store for CUDA collectives");
  if (c.backend == "nccl") {
    comm::NcclOptions o;
    o.timeout = timeout;
    o.key = "train/nccl";
    comm.attach_nccl(
        std::make_unique<comm::NcclGroup>(comm.store(), comm.rank(), comm.size(), dev.index, o));
    return "nccl";
  }
  if (c.cuda_ring == "staged") return "staged";
  // Every rank takes the same branch: local_size() == size() is the same on every rank.
  const std::string why_not_ipc = comm.local_size() == comm.size()
                                      ? comm::ipc_ring_problem(comm, dev.index)
                                      : "the ranks span more than one host";
  if (!why_not_ipc.empty()) {
    ENGINE_CHECK(c.cuda_ring != "ipc", "--cuda-ring ipc on rank ", comm.rank(), ": ", why_not_ipc);
    return "staged (" + why_not_ipc + ")";
  }
  comm::IpcRingOptions o;
  o.timeout = timeout;
  o.key = "train/ipc_ring";
  ENGINE_CHECK(comm::parse_ipc_protocol(c.cuda_ring_protocol, &o.protocol), "--cuda-ring-protocol ",
               c.cuda_ring_protocol,
               ": not a protocol of the CUDA IPC ring (auto, ll, simple, events)");
  if (c.cuda_ring_channels > 0) o.channels = static_cast<int>(c.cuda_ring_channels);
  auto ring =
      std::make_unique<comm::CudaIpcRing>(comm.store(), comm.rank(), comm.size(), dev.index, o);
  // Auto in a time-sliced ring runs the event chain: "ipc (protocol auto: events, ...)".
  const std::string ran =
      ring->protocol() == o.protocol
          ? c.cuda_ring_protocol
          : c.cuda_ring_protocol + ": " + comm::ipc_protocol_name(ring->protocol());
  const std::string what =
      ring->mode().empty() ? "ipc" : "ipc (protocol " + ran + ", mode " + ring->mode() + ")";
  comm.attach_ipc_ring(std::move(ring));
  return what;
}

}  // namespace engine::apps
