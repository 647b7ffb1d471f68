// comm/rendezvous/rendezvous.cpp: see rendezvous.h. Store keys, under "engine/<generation>/":
//   rank/<r>        "host-identity\naddress\nport\nnonce"  (rank 0's nonce names the job)
//   shm/<leader>    name of the host's shared-memory segment; shm_mapped/<r> once mapped
#include "comm/rendezvous/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "comm/backends/mpi/mpi_world.h"
#include "comm/health/blame.h"
#include "comm/rendezvous/file_store.h"
#include "comm/rendezvous/mpi_meet.h"
#include "comm/rendezvous/slurm_env.h"
#include "comm/rendezvous/tcp_store.h"
#include "comm/rendezvous/torch_store.h"
#include "comm/transport/mem_transport.h"
#include "comm/transport/shm_transport.h"
#include "comm/transport/tcp_transport.h"
#include "core/error.h"
#include "core/knobs.h"

namespace engine::comm {

const char* transport_kind_name(TransportKind k) {
  switch (k) {
    case TransportKind::Auto:
      return "auto";
    case TransportKind::Tcp:
      return "tcp";
    case TransportKind::Shm:
      return "shm";
  }
  return "?";
}

TransportKind transport_kind_from_name(const std::string& s) {
  if (s == "auto") return TransportKind::Auto;
  if (s == "tcp") return TransportKind::Tcp;
  if (s == "shm") return TransportKind::Shm;
  ENGINE_FAIL("unknown transport '", s, "' (expected auto, tcp or shm)");
}

std::string host_identity() {
  if (std::string forced = knobs::comm_host_id(); !forced.empty()) return forced;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  // Shared memory needs the same IPC namespace, not only the same machine (containers).
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/ipc", ns, sizeof ns - 1);
  if (n < 0) ns[0] = 0;
  return std::string(host) + "/" + boot + "/" + ns;
}

// ---------------------------------------------------------------------------------------------
// Init methods

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int parse_int(const std::string& s, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  ENGINE_CHECK(!s.empty() && end && *end == 0, what, ": '", s, "' is not an integer");
  ENGINE_CHECK(errno != ERANGE && v >= INT_MIN && v <= INT_MAX, what, ": '", s,
               "' is out of range");
  return static_cast<int>(v);
}

// A TCP port, 1 .. 65535 (0 would bind a random port nobody else knows).
int parse_port(const std::string& s, const std::string& what) {
  const int port = parse_int(s, what);
  ENGINE_CHECK(port >= 1 && port <= 65535, what, " is ", s, ": a port must be 1 .. 65535");
  return port;
}

// "host:port" -> (host, port); accepts "[v6]:port".
std::pair<std::string, int> split_host_port(const std::string& s, const std::string& what) {
  auto colon = s.rfind(':');
  ENGINE_CHECK(colon != std::string::npos && colon > 0, what, ": expected host:port, got '", s,
               "'");
  std::string host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, parse_port(s.substr(colon + 1), what + " port")};
}

}  // namespace

void check_init_method(const std::string& m) {
  if (m == "env://") return;
  if (m.rfind("tcp://", 0) == 0) {
    split_host_port(m.substr(6), "tcp:// init method '" + m + "'");
    return;
  }
  if (m.rfind("file://", 0) == 0) {
    ENGINE_CHECK(m.size() > 7, "file:// init method needs a path (file:///shared/dir)");
    return;
  }
  ENGINE_FAIL("unknown init method '", m, "' (expected env://, tcp://host:port or file:///path)");
}

InitTarget resolve_init_method(const InitOptions& o) {
  InitTarget t;
  t.rank = o.rank;
  t.world_size = o.world_size;
  const std::string& m = o.init_method;
  const Millis timeout = o.connect.timeout;
  std::string host;
  int port = 0;
  if (m == "env://") {
    struct Source {
      const char *rank, *size, *who;
    };
    const Source sources[] = {{"RANK", "WORLD_SIZE", "torchrun"},
                              {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
                              {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"}};
    const char* who = nullptr;
    for (const Source& s : sources) {
      if (!env(s.rank) && !env(s.size)) continue;
      who = s.who;
      if (t.rank < 0) {
        ENGINE_CHECK(env(s.rank), "env:// (", s.who, "): ", s.size, " is set but ", s.rank,
                     " is not");
        t.rank = parse_int(env(s.rank), s.rank);
      }
      if (t.world_size < 0) {
        ENGINE_CHECK(env(s.size), "env:// (", s.who, "): ", s.rank, " is set but ", s.size,
                     " is not");
        t.world_size = parse_int(env(s.size), s.size);
      }
      break;
    }
    ENGINE_CHECK(t.rank >= 0 && t.world_size >= 1,
                 "env://: no rank and world size: set RANK and WORLD_SIZE (torchrun), run under "
                 "mpirun or srun, or give the rank and the world size");
    const char* addr = env("MASTER_ADDR");
    const char* p = env("MASTER_PORT");
    // mpirun and no store named: the ranks meet through MPI (comm/rendezvous/mpi_meet.h).
    if (!addr && !p && started_by_mpirun()) {
      t.store = meet_through_mpi(timeout, o.connect.bind_address);
      return t;
    }
    std::string slurm_addr, slurm_port;
    if (who && std::string(who) == "Slurm" &&
        !(addr && p)) {  // srun: MASTER_* optional (slurm_env.h)
      slurm::StoreAddress a = slurm::resolved_store_address();
      slurm_addr = a.host, slurm_port = std::to_string(a.port);
      addr = slurm_addr.c_str(), p = slurm_port.c_str();
    }
    ENGINE_CHECK(addr && p, "env://: MASTER_ADDR and MASTER_PORT must name rank 0's store (",
                 addr ? "MASTER_PORT" : "MASTER_ADDR", " is not set)");
    host = addr;
    port = parse_port(p, "MASTER_PORT");
  } else if (m.rfind("tcp://", 0) == 0) {
    std::tie(host, port) = split_host_port(m.substr(6), "tcp:// init method '" + m + "'");
  } else if (m.rfind("file://", 0) == 0) {
    ENGINE_CHECK(t.rank >= 0 && t.world_size >= 1,
                 "file:// init method needs the rank and the world size");
    std::string path = m.substr(7);
    ENGINE_CHECK(!path.empty(), "file:// init method needs a path (file:///shared/dir)");
    t.store = std::make_shared<FileStore>(path, timeout);
    return t;
  } else {
    ENGINE_FAIL("unknown init method '", m, "' (expected env://, tcp://host:port or file:///path)");
  }
  ENGINE_CHECK(t.rank >= 0 && t.world_size >= 1, m, " needs the rank and the world size");
  ENGINE_CHECK(t.rank < t.world_size, "rank ", t.rank, " is not below the world size ",
               t.world_size);
  // torchrun's static rendezvous: its agent serves the store, every rank is a client.
  t.store = torch_agent_store_from_env(host, port, timeout);
  // Otherwise rank 0 serves on MASTER_ADDR's interface (every interface only for 0.0.0.0 or ::),
  // unless our launch serves it (ENGINE_AGENT_STORE=1: launch --on-rank-loss continue, so that
  // the store outlives any rank).
  const std::string& bind = o.connect.bind_address.empty() ? host : o.connect.bind_address;
  const bool agent = env("ENGINE_AGENT_STORE") && std::string(env("ENGINE_AGENT_STORE")) == "1";
  if (!t.store)
    t.store = std::make_shared<TcpStore>(host, port, t.rank == 0 && !agent, timeout, bind);
  return t;
}

std::unique_ptr<Communicator> init_communicator(const InitOptions& opts) {
  InitTarget t = resolve_init_method(opts);
  return connect_communicator(t.store, t.rank, t.world_size, opts.connect);
}

std::optional<InitTarget> job_target(const InitOptions& opts) {
  const bool launched = std::getenv("WORLD_SIZE") || std::getenv("OMPI_COMM_WORLD_SIZE") ||
                        slurm::in_step();  // not an sbatch script's own SLURM_NTASKS
  if (opts.init_method == "env://" && opts.world_size < 0 && !launched) return std::nullopt;
  if (opts.world_size == 1) return std::nullopt;
  InitTarget t = resolve_init_method(opts);
  if (t.world_size == 1) return std::nullopt;
  return t;
}

std::unique_ptr<Communicator> join_job(const InitOptions& opts) {
  std::optional<InitTarget> t = job_target(opts);
  return t ? connect_communicator(t->store, t->rank, t->world_size, opts.connect) : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Connecting

namespace {

struct RankInfo {
  std::string host_id, addr, transport;
  int port = 0;
  uint64_t nonce = 0;
};

std::string encode(const RankInfo& i) {
  return i.host_id + "\n" + i.addr + "\n" + std::to_string(i.port) + "\n" +
         std::to_string(i.nonce) + "\n" + i.transport;
}

RankInfo decode(const std::string& s, int rank) {
  std::istringstream is(s);
  RankInfo i;
  std::string port, nonce;
  ENGINE_CHECK(std::getline(is, i.host_id) && std::getline(is, i.addr) && std::getline(is, port) &&
                   std::getline(is, nonce) && std::getline(is, i.transport),
               "rendezvous: malformed entry of rank ", rank, " in the store");
  char* end = nullptr;
  errno = 0;
  i.nonce = std::strtoull(nonce.c_str(), &end, 10);
  ENGINE_CHECK(!nonce.empty() && *end == 0 && errno != ERANGE, "rendezvous: entry of rank ", rank,
               " in the store has a malformed nonce '", nonce, "'");
  i.port =
      port == "0" ? 0 : parse_port(port, "rendezvous: data port of rank " + std::to_string(rank));
  return i;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// Step 1, publish: this rank's entry (host, data port, rank 0's nonce, transport) in the store.
RankInfo publish(Store& store, const std::string& pre, int rank, int world, const ConnectOptions& o,
                 Socket* listener) {
  RankInfo me;
  me.host_id = host_identity();
  me.transport = transport_kind_name(o.transport);
  // The data port listens where peers are told to connect: the interface that reaches rank 0
  // (every interface only when the bind address or MASTER_ADDR says so).
  auto* tcp = dynamic_cast<TcpStore*>(&store);
  std::string bind = o.bind_address;
  if (!is_any_address(o.bind_address)) {
    me.addr = o.bind_address;
  } else if (tcp) {
    me.addr = tcp->local_host();  // the interface that reaches rank 0
    if (o.bind_address.empty() && !is_any_address(tcp->host())) bind = me.addr;
  } else if (auto* torch = dynamic_cast<TorchStore*>(&store)) {
    me.addr = torch->local_host();  // the interface that reaches torchrun's agent
    if (o.bind_address.empty()) bind = me.addr;
  } else {
    me.addr = "127.0.0.1";
    if (o.bind_address.empty()) bind = me.addr;
  }
  if (world > 1) {
    *listener = listen_tcp(bind, 0, "data port of rank " + std::to_string(rank));
    me.port = listener->local_port();
  }
  if (rank == 0) {
    std::random_device rd;
    me.nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }
  store.set(pre + "rank/" + std::to_string(rank), encode(me));
  return me;
}

// Step 2, gather: every rank's entry, waiting for them (a timeout names the ranks missing).
std::vector<RankInfo> gather_ranks(Store& store, const std::string& pre, int rank, int world,
                                   const RankInfo& me, const ConnectOptions& o,
                                   const Deadline& dl) {
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(pre + "rank/" + std::to_string(r));
  try {
    store.wait(keys, dl.remaining());
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < world; ++r)
      if (!store.check({keys[r]})) missing.push_back(r);
    throw TimeoutError(detail::concat("rendezvous through ", store.describe(), " timed out after ",
                                      seconds_str(o.timeout), " on rank ", rank, ": ranks [",
                                      rank_list(missing), "] of ", world, " never arrived"));
  }
  std::vector<RankInfo> info(world);
  for (int r = 0; r < world; ++r) info[r] = decode(store.get(keys[r]), r);
  for (int r = 0; r < world; ++r)
    ENGINE_CHECK(info[r].transport == me.transport, "ranks disagree on the transport: rank ", r,
                 " uses ", info[r].transport, ", rank ", rank, " uses ", me.transport);
  return info;
}

// Who talks how: the ranks on this host (ascending) and which peers go over shared memory.
struct Links {
  std::vector<int> local;
  std::vector<bool> via_shm;
  bool use_shm = false;
};

Links plan_links(const std::vector<RankInfo>& info, int rank, TransportKind kind) {
  const int world = static_cast<int>(info.size());
  Links l;
  for (int r = 0; r < world; ++r)
    if (info[r].host_id == info[rank].host_id) l.local.push_back(r);
  if (kind == TransportKind::Shm && static_cast<int>(l.local.size()) != world) {
    std::vector<int> far;
    for (int r = 0; r < world; ++r)
      if (info[r].host_id != info[rank].host_id) far.push_back(r);
    ENGINE_FAIL("transport shm needs every rank on one host, but ranks [", rank_list(far),
                "] are on another host than rank ", rank, "; use the tcp or auto transport");
  }
  l.use_shm = kind != TransportKind::Tcp && l.local.size() > 1;
  l.via_shm.assign(world, false);
  if (l.use_shm)
    for (int r : l.local) l.via_shm[r] = r != rank;
  return l;
}

// Step 3, wire TCP: the socket mesh (two sockets per TCP peer, one liveness socket per shared
// memory peer), and the TCP peers' channels.
std::vector<std::vector<Socket>> wire_tcp(Transport& t, const std::vector<RankInfo>& info,
                                          const Links& l, Socket& listener, const Deadline& dl) {
  const int rank = t.rank(), world = t.world();
  std::vector<MeshPeer> peers(world);
  for (int r = 0; r < world; ++r) {
    peers[r].host = info[r].addr;
    peers[r].port = info[r].port;
    peers[r].sockets = r == rank ? 0 : l.via_shm[r] ? 1 : 2;
  }
  std::vector<std::vector<Socket>> socks;
  if (world > 1) socks = connect_mesh(rank, info[0].nonce, listener, peers, dl);
  for (int r = 0; r < world; ++r) {
    if (r == rank || l.via_shm[r]) continue;
    t.set_channel(r, Lane::Collective, std::make_unique<SocketChannel>(std::move(socks[r][0])));
    t.set_channel(r, Lane::P2P, std::make_unique<SocketChannel>(std::move(socks[r][1])));
  }
  return socks;
}

// Step 4, wire shared memory: the host's fabric, a ring per (peer, stream), the doorbells, and the
// mesh's remaining socket per local peer as its liveness check.
void wire_shm(Transport& t, Store& store, const std::string& pre, const Links& l, uint64_t nonce,
              std::vector<std::vector<Socket>>& socks, const Deadline& dl) {
  const int rank = t.rank();
  ShmFabric f = open_shm_fabric(store, pre, l.local, rank, nonce, dl);
  for (size_t j = 0; j < l.local.size(); ++j) {
    const int r = l.local[j];
    if (r == rank) continue;
    for (int s = 0; s < 2; ++s) {
      auto* tx = reinterpret_cast<RingHeader*>(f.base + f.layout.ring(f.index, j, s));
      auto* rx = reinterpret_cast<RingHeader*>(f.base + f.layout.ring(j, f.index, s));
      auto* bell = reinterpret_cast<Doorbell*>(f.base + f.layout.bell(j));
      t.set_channel(r, static_cast<Lane>(s), std::make_unique<RingChannel>(tx, rx, bell));
    }
    t.set_liveness(r, std::move(socks[r][0]));
  }
  t.set_doorbell(reinterpret_cast<Doorbell*>(f.base + f.layout.bell(f.index)));
  t.keep_alive(f.mapping);
}

std::string transport_name(const Links& l, int world) {
  if (world == 1) return "self";
  if (!l.use_shm) return "tcp";
  return l.local.size() == static_cast<size_t>(world) ? "shm" : "shm+tcp";
}

}  // namespace

std::unique_ptr<Communicator> connect_communicator(std::shared_ptr<Store> store, int rank,
                                                   int world, const ConnectOptions& o) {
  ENGINE_CHECK(store, "connect_communicator: no store");
  ENGINE_CHECK(world >= 1 && rank >= 0 && rank < world, "connect_communicator: rank ", rank,
               " of world size ", world);
  const Deadline dl = Deadline::after(o.timeout);
  const std::string pre =
      !o.meeting.empty()
          ? o.meeting
          : "engine/" + std::to_string(store->add("engine/gen/" + std::to_string(rank), 1)) + "/";

  Socket listener;
  const RankInfo me = publish(*store, pre, rank, world, o, &listener);
  // The health endpoint listens where the data port does.
  auto health =
      world > 1 ? publish_health(*store, pre, rank, me.addr, listener.local_host()) : nullptr;
  const std::vector<RankInfo> info = gather_ranks(*store, pre, rank, world, me, o, dl);
  const Links links = plan_links(info, rank, o.transport);
  auto transport = std::make_shared<Transport>(rank, world, transport_name(links, world));
  // Before the links, whose set-up is the ranks' last meeting: rank 0's store may go after it.
  if (health) attach_blamer(*transport, *store, pre, health, info[0].nonce, o.timeout, dl);
  auto socks = wire_tcp(*transport, info, links, listener, dl);
  if (links.use_shm) wire_shm(*transport, *store, pre, links, info[0].nonce, socks, dl);
  set_default_spin(*transport, static_cast<int>(links.local.size()), links.use_shm);

  CommOptions copts;
  copts.timeout = o.timeout;
  copts.segment_bytes = o.segment_bytes;
  auto comm = std::make_unique<Communicator>(transport, copts, store);
  // The hosts by identity (local rank and size: this rank's among the ranks of its host).
  std::vector<int> hosts(world);
  for (int r = 0; r < world; ++r)
    for (int q = 0; q <= r; ++q)
      if (info[q].host_id == info[r].host_id) {
        hosts[r] = q;
        break;
      }
  comm->set_hosts(std::move(hosts));
  return comm;
}

std::vector<std::unique_ptr<Communicator>> make_mem_communicators(int world, CommOptions opts) {
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& t : make_mem_transports(world)) {
    out.push_back(std::make_unique<Communicator>(t, opts));
    out.back()->set_local(t->rank(), world);
  }
  return out;
}

}  // namespace engine::comm
