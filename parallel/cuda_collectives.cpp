// parallel/cuda_collectives.cpp: see cuda_collectives.h.
#include "parallel/cuda_collectives.h"

#include <memory>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/backends/cuda_ipc/ipc_peers.h"
#include "comm/backends/mpi/mpi_backend.h"
#include "comm/backends/mpi/mpi_world.h"
#include "comm/backends/nccl/nccl_group.h"
#include "core/error.h"

namespace engine::parallel {

namespace {

// Mpi: every collective through MPI, those of CUDA tensors staged through host memory.
std::string attach_mpi(comm::Communicator& comm, Device dev, double timeout_s) {
  const comm::Millis timeout(static_cast<int64_t>(timeout_s * 1000));
  comm.set_backend(DeviceKind::CPU, comm::make_mpi_backend(comm.rank(), comm.size(), timeout));
  if (dev.is_cpu()) return "";
  comm.set_backend(DeviceKind::CUDA, comm::make_mpi_backend(comm.rank(), comm.size(), timeout));
  return "mpi (staged through host memory)";
}

}  // namespace

std::string attach_cuda_collectives(const CudaCollectiveOptions& o, comm::Communicator& comm,
                                    Device dev) {
  using Why = CollectivesRefused::Why;
  // One MIN over [on cuda, -on cuda]: the second is minus the MAX of "on cuda".
  const int64_t on_cuda = dev.is_cuda() ? 1 : 0;
  int64_t mins[2] = {on_cuda, -on_cuda};
  comm.all_reduce(mins, 2, DType::I64, comm::ReduceOp::Min);
  if (mins[0] != -mins[1])
    throw CollectivesRefused(
        Why::MixedDevices, "",
        detail::concat("rank ", comm.rank(), " trains on ", dev.str(), " but other ranks train on ",
                       dev.is_cuda() ? "the cpu" : "a GPU", ": every rank needs a GPU"));
  if (o.backend == CollectiveBackend::Mpi) return attach_mpi(comm, dev, o.timeout_s);
  if (dev.is_cpu()) {
    if (o.backend == CollectiveBackend::Nccl)
      throw CollectivesRefused(Why::NcclOnCpu, cuda_unavailable_reason(),
                               "NCCL reduces CUDA tensors and this rank trains on the cpu (" +
                                   cuda_unavailable_reason() + ")");
    return "";
  }
  const comm::Millis timeout(static_cast<int64_t>(o.timeout_s * 1000));
  ENGINE_CHECK(comm.store() != nullptr, "rank ", comm.rank(),
               ": no rendezvous store for CUDA collectives");
  if (o.backend == CollectiveBackend::Nccl) {
    comm::NcclOptions n;
    n.timeout = timeout;
    n.key = "train/nccl";
    comm.attach_nccl(
        std::make_unique<comm::NcclGroup>(comm.store(), comm.rank(), comm.size(), dev.index, n));
    return "nccl";
  }
  if (o.cuda_ring == CudaRing::Staged) return "staged";
  // Every rank takes the same branch: local_size() == size() is the same on every rank.
  const std::string why_not_ipc = comm.local_size() == comm.size()
                                      ? comm::ipc_ring_problem(comm, dev.index)
                                      : "the ranks span more than one host";
  if (!why_not_ipc.empty()) {
    if (o.cuda_ring == CudaRing::Ipc)
      throw CollectivesRefused(
          Why::NoIpc, why_not_ipc,
          detail::concat("the CUDA IPC ring on rank ", comm.rank(), ": ", why_not_ipc));
    return "staged (" + why_not_ipc + ")";
  }
  comm::IpcRingOptions r;
  r.timeout = timeout;
  r.key = "train/ipc_ring";
  r.protocol = o.protocol;
  if (o.channels > 0) r.channels = o.channels;
  auto ring =
      std::make_unique<comm::CudaIpcRing>(comm.store(), comm.rank(), comm.size(), dev.index, r);
  // What auto chose, when it chose: "ipc (protocol auto: ll, mode ...)".
  const std::string asked = comm::ipc_protocol_name(r.protocol);
  const std::string ran = ring->protocol() == r.protocol
                              ? asked
                              : asked + ": " + comm::ipc_protocol_name(ring->protocol());
  const std::string what =
      ring->mode().empty() ? "ipc" : "ipc (protocol " + ran + ", mode " + ring->mode() + ")";
  comm.attach_ipc_ring(std::move(ring));
  return what;
}

}  // namespace engine::parallel
