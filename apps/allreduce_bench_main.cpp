// apps/allreduce_bench_main.cpp: nccl-tests for our collectives. Forks --world-size ranks on this
// host (meeting at tcp://127.0.0.1:<free port>), or joins ranks started by `launch` (env://);
// rank 0 prints one table per collective and, with --json, one JSON object per row.
// --device cuda puts the buffers on GPUs (rank r on cuda:(local rank % devices)), moved by our
// Communicator's Tensor overloads (--backend ring: staged through host memory, or --ring-transport
// ipc) or by NCCL (--backend nccl); exit code 2 when no CUDA device answers. --backend mpi (ranks
// started by mpirun, meeting through MPI) puts every collective on MPI, host or CUDA buffers.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "apps/allreduce_bench/config.h"
#include "apps/allreduce_bench/cuda_env.h"
#include "apps/allreduce_bench/report.h"
#include "apps/allreduce_bench/runner.h"
#include "apps/allreduce_bench/spawn.h"
#include "apps/program.h"
#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/backends/cuda_ipc/ipc_peers.h"
#include "comm/backends/mpi/mpi_backend.h"
#include "comm/backends/mpi/mpi_world.h"
#include "comm/backends/nccl/nccl_group.h"
#include "comm/rendezvous/rendezvous.h"
#include "comm/transport/socket.h"
#include "core/cuda_backend.h"
#include "core/device.h"
#include "core/error.h"

namespace {

using engine::allreduce_bench::Config;
using engine::allreduce_bench::Row;
using engine::comm::CollOp;

// --backend mpi: "mpi (Open MPI v4.1.4): every collective through MPI".
std::string mpi_text() {
  return "mpi (" + engine::comm::mpi_library_version() + "): every collective through MPI";
}

// What a rank on a CUDA device runs with; the text is for the "# device" line.
struct CudaSetup {
  engine::allreduce_bench::Backend backend;
  std::unique_ptr<engine::comm::NcclGroup> nccl;
  std::string devices, backend_text;
  std::string mode;  // the CUDA IPC ring's, "" when it does not run
};

// The IPC ring's geometry for the header line (the requested values; the ring clamps channels to
// half the SMs): Simple's channels and FIFO (the event chain has none).
std::string ipc_geometry(const engine::comm::IpcRingOptions& o, engine::comm::IpcProtocol ran) {
  if (ran == engine::comm::IpcProtocol::Events)
    return std::string(o.protocol == ran ? "" : "runs events, ") + "no FIFO";
  return std::to_string(o.channels) + " channels, " + std::to_string(o.slots) + " slots of " +
         std::to_string(o.slot_bytes) + " bytes";
}

// Picks this rank's GPU and builds what moves the data: an NcclGroup (through the store
// the ranks met at), the CUDA IPC ring attached to comm, or nothing (comm stages through host
// memory).
CudaSetup setup_cuda(const Config& cfg, engine::comm::Communicator& comm,
                     const std::shared_ptr<engine::comm::Store>& store) {
  namespace ab = engine::allreduce_bench;
  const int count = engine::cuda_device_count();
  ENGINE_CHECK(count > 0, engine::cuda_unavailable_reason());
  CudaSetup s;
  const int device = comm.local_rank() % count;
  engine::cuda::set_home_device(device);  // no context on any other GPU
  s.backend.device = device;
  const engine::comm::Millis timeout(cfg.timeout_s * 1000);
  if (cfg.nccl()) {
    ENGINE_CHECK(comm.local_size() <= count, "--backend nccl: ", comm.local_size(),
                 " ranks on this host but ", count,
                 " CUDA device(s): NCCL needs a GPU of its own per rank");
    engine::comm::NcclOptions o;
    o.timeout = timeout;
    o.key = "allreduce_bench/nccl";
    s.nccl = std::make_unique<engine::comm::NcclGroup>(store, comm.rank(), comm.size(), device, o);
    s.backend.nccl = s.nccl.get();
    s.backend_text = "nccl (comm::NcclGroup, NCCL " + ab::nccl_version() +
                     "); the host transport only lines the ranks up and combines the times";
  } else if (cfg.mpi()) {
    comm.set_backend(engine::DeviceKind::CUDA,
                     engine::comm::make_mpi_backend(comm.rank(), comm.size(), timeout));
    s.backend_text = mpi_text() + ", CUDA tensors staged through host memory";
  } else if (cfg.ring_transport == "ipc") {
    const std::string why = engine::comm::ipc_ring_problem(comm, device);  // every rank
    ENGINE_CHECK(why.empty(), "--ring-transport ipc on cuda:", device, ": ", why);
    engine::comm::IpcRingOptions o;
    o.timeout = timeout;
    o.key = "allreduce_bench/ipc";
    (void)engine::comm::parse_ipc_protocol(cfg.cuda_ring_protocol, &o.protocol);  // a --flag choice
    if (cfg.cuda_ring_channels > 0) o.channels = static_cast<int>(cfg.cuda_ring_channels);
    if (cfg.cuda_ring_slot_bytes > 0) o.slot_bytes = static_cast<size_t>(cfg.cuda_ring_slot_bytes);
    auto ring =
        std::make_unique<engine::comm::CudaIpcRing>(store, comm.rank(), comm.size(), device, o);
    s.mode = ring->mode();  // auto in a time-sliced ring: "time-sliced", and it runs events
    const std::string geometry = ipc_geometry(o, ring->protocol());
    comm.attach_ipc_ring(std::move(ring));
    s.backend_text =
        "ring, Communicator Tensor overloads: float32 all_reduce on the CUDA IPC ring "
        "(path " +
        comm.cuda_path() + ", protocol " + cfg.cuda_ring_protocol +
        (s.mode.empty() ? "" : ", mode " + s.mode) + ", " + geometry +
        "), the other collectives staged through pinned host memory and the host "
        "transport";
  } else {
    s.backend_text =
        "ring, Communicator Tensor overloads: staged through pinned host memory and "
        "the host transport";
  }
  s.devices = "rank r on cuda:(local rank % " + std::to_string(count) + "), rank " +
              std::to_string(comm.rank()) + " on cuda:" + std::to_string(device) + " (" +
              ab::device_name(device) + ")";
  return s;
}

// One rank: connect, run, report. Returns the exit code.
int rank_main(const Config& cfg, engine::comm::InitOptions init, int forked_rank) {
  namespace ab = engine::allreduce_bench;
  try {
    // init_communicator(init), keeping the store: NCCL and the IPC ring meet through it too.
    engine::comm::InitTarget target = engine::comm::resolve_init_method(init);
    auto comm = engine::comm::connect_communicator(target.store, target.rank, target.world_size,
                                                   init.connect);
    if (cfg.segment_bytes > 0) comm->set_segment_bytes(static_cast<size_t>(cfg.segment_bytes));
    comm->set_two_level(cfg.two_level);
    if (cfg.mpi())
      comm->set_backend(
          engine::DeviceKind::CPU,
          engine::comm::make_mpi_backend(comm->rank(), comm->size(), init.connect.timeout));
    CudaSetup cuda;
    if (cfg.cuda()) cuda = setup_cuda(cfg, *comm, target.store);
    std::unique_ptr<FILE, int (*)(FILE*)> json(nullptr, fclose);
    FILE* table = stdout;
    if (comm->rank() == 0 && !cfg.json_path.empty()) {
      if (cfg.json_path == "-") {
        table = stderr;  // stdout carries the JSON rows alone
      } else {
        json.reset(std::fopen(cfg.json_path.c_str(), "w"));
        if (!json) throw engine::Error("--json: cannot write " + cfg.json_path);
      }
    }
    FILE* json_out = cfg.json_path == "-" ? stdout : json.get();
    if (comm->rank() == 0) {
      ab::print_preamble(table, cfg, comm->size(), comm->transport_kind(), comm->segment_bytes());
      if (cfg.cuda())
        ab::print_device_line(table, cfg, cuda.devices, cuda.backend_text);
      else if (cfg.mpi())
        ab::print_device_line(table, cfg, "host memory", mpi_text());
      if (comm->uses_two_level())
        std::fprintf(table, "# all_reduce in two levels: %d hosts (--two-level %s)\n",
                     comm->num_hosts(), engine::comm::two_level_name(cfg.two_level));
    }
    std::vector<Row> rows;  // of the current table, for --algo all's side-by-side lines
    auto side_by_side = [&] {
      if (cfg.every_algo()) ab::print_side_by_side(table, rows);
      rows.clear();
    };
    ab::run_rank(
        *comm, cfg,
        [&](CollOp c) {
          side_by_side();
          ab::print_table_header(table, c, comm->size());
        },
        [&](const Row& row) {
          rows.push_back(row);
          ab::print_row(table, row);
          if (json_out) {
            std::fprintf(json_out, "%s\n", ab::json_row(row, cfg, cuda.mode).c_str());
            std::fflush(json_out);
          }
        },
        cuda.backend);
    if (comm->rank() == 0) side_by_side();
    comm->barrier();
    cuda.nccl.reset();  // before the communicator (and its store) go
    return 0;
  } catch (const std::exception& e) {
    std::string who = forked_rank >= 0 ? " [rank " + std::to_string(forked_rank) + "]" : "";
    std::fprintf(stderr, "allreduce_bench%s: %s\n", who.c_str(), e.what());
    return 1;
  }
}

int run(int argc, char** argv) {
  Config cfg;
  if (!engine::allreduce_bench::parse_flags(argc, argv, &cfg)) return 0;
  if (cfg.cuda()) {
    // Asked in a child process: CUDA initialised here would not survive the fork of the ranks.
    const engine::allreduce_bench::CudaProbe probe = engine::allreduce_bench::probe_cuda_devices();
    if (probe.count == 0) {
      std::fprintf(stderr, "allreduce_bench: %s\n", probe.reason.c_str());
      return 2;
    }
    if (cfg.nccl() && cfg.world_size > probe.count) {
      std::fprintf(stderr,
                   "allreduce_bench: --backend nccl: %d ranks on this host but %d CUDA device(s): "
                   "NCCL needs a GPU of its own per rank\n",
                   cfg.world_size, probe.count);
      return 2;
    }
  }
  engine::comm::InitOptions init;
  init.init_method = cfg.init_method;
  init.connect.transport = cfg.transport;
  init.connect.timeout = engine::comm::Millis(cfg.timeout_s * 1000);
  if (cfg.world_size == 0) return rank_main(cfg, init, -1);

  // Forked ranks meet at a store that rank 0 serves on a port that was free a moment ago.
  const int port = engine::comm::listen_tcp("127.0.0.1", 0, "free port probe").local_port();
  init.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  init.world_size = cfg.world_size;
  init.connect.bind_address = "127.0.0.1";
  return engine::allreduce_bench::spawn_ranks(cfg.world_size, [&](int r) {
    engine::comm::InitOptions mine = init;
    mine.rank = r;
    return rank_main(cfg, mine, r);
  });
}

}  // namespace

int main(int argc, char** argv) {
  return engine::apps::run_program("allreduce_bench", argc, argv, run);
}
