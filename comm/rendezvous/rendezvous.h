// comm/rendezvous/rendezvous.h: how W processes find each other and become a Communicator.
//
// Init methods (as torch.distributed):
//   env://               RANK, WORLD_SIZE (torchrun), else OMPI_COMM_WORLD_RANK / _SIZE (Open MPI),
//                        else SLURM_PROCID / SLURM_NTASKS (Slurm); MASTER_ADDR and MASTER_PORT name
//                        the TCP store that rank 0 serves (our launch serves it instead with
//                        ENGINE_AGENT_STORE=1; under srun they are optional: the
//                        first host of the node list, a port from the job id,
//                        comm/rendezvous/slurm_env.h), or, with TORCHELASTIC_USE_AGENT_STORE=True
//                        (torchrun's static rendezvous), the c10d TCPStore torchrun's agent serves
//                        (comm/rendezvous/torch_store.h). Explicit rank / world_size win. Under
//                        mpirun with neither MASTER_ variable set, the ranks meet through MPI
//                        instead (comm/rendezvous/mpi_meet.h).
//   tcp://host:port      the same store, rank and world_size given explicitly.
//   file:///path         a FileStore directory on a filesystem all ranks see; rank and world_size
//                        given explicitly.
// Then every rank publishes its host identity and data address in the store and waits for all
// W ranks (listing those that never arrived if the timeout passes), and the ranks connect: shared
// memory between ranks whose host identities match (transport auto or shm), TCP otherwise.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/base/store.h"
#include "comm/communicator.h"

namespace engine::comm {

enum class TransportKind { Auto, Tcp, Shm };
const char* transport_kind_name(TransportKind k);
// "auto", "tcp" or "shm"; engine::Error otherwise.
TransportKind transport_kind_from_name(const std::string& s);

struct ConnectOptions {
  Millis timeout{300000};  // rendezvous, connection and every later wait of the communicator
  TransportKind transport = TransportKind::Auto;
  // Address the data port (and rank 0's store) listens on: "" = all interfaces. A specific
  // address is also what peers are told to connect to.
  std::string bind_address;
  size_t segment_bytes = CommOptions{}.segment_bytes;
  // Where in the store the ranks meet: "" = engine/<n>/, n counting this rank's connects; a
  // regrouped job (comm/rendezvous/membership.h) names its generation's own place instead.
  std::string meeting;
};

struct InitOptions {
  std::string init_method = "env://";
  int rank = -1;        // -1: from the environment (env://); required for tcp:// and file://
  int world_size = -1;  // likewise
  ConnectOptions connect;
};

// Rank, world size and store of an init method, without connecting the ranks.
struct InitTarget {
  int rank = -1;
  int world_size = -1;
  std::shared_ptr<Store> store;
};
InitTarget resolve_init_method(const InitOptions& opts);
// Throws engine::Error unless m is env://, tcp://host:port (port 1 .. 65535) or file:///path:
// the syntax alone, whatever the world size, without touching the network or the environment.
void check_init_method(const std::string& m);

// Rendezvous and connect: the usual entry point of a rank.
std::unique_ptr<Communicator> init_communicator(const InitOptions& opts);
// init_communicator, or nullptr when this process is a job of one: env:// with no world size
// given and no launcher's variables (torchrun's, Open MPI's, a Slurm step's), or a world of 1.
std::unique_ptr<Communicator> join_job(const InitOptions& opts);
// What join_job would connect: nullopt where it returns nullptr (a job of one).
std::optional<InitTarget> job_target(const InitOptions& opts);

// Rendezvous through an existing store (e.g. a MemStore shared by threads) and connect. Several
// communicators may be made through one store: each call of a rank takes the next generation.
std::unique_ptr<Communicator> connect_communicator(std::shared_ptr<Store> store, int rank,
                                                   int world_size, const ConnectOptions& opts);

// Ranks as threads of one process: communicators over connected in-memory transports
// (comm/transport/mem_transport.h), no store and no sockets; hand comms[r] to the thread of rank r.
std::vector<std::unique_ptr<Communicator>> make_mem_communicators(int world, CommOptions opts = {});

// This host's identity: ranks with equal identities can share memory. Hostname, boot id and IPC
// namespace, unless the environment variable ENGINE_COMM_HOST_ID sets it (to keep containers that
// share a kernel apart, or to test mixed shm+tcp jobs on one machine).
std::string host_identity();

}  // namespace engine::comm
