// comm/rendezvous/mpi_meet.cpp: see mpi_meet.h. With MPI: rank 0 serves the TCP store and
// MPI_Bcast's where; without MPI: an error saying how to build with it or how to name the store.
#include "comm/rendezvous/mpi_meet.h"

#include "comm/backends/mpi/mpi_world.h"
#include "core/error.h"

#ifdef ENGINE_WITH_MPI
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>

#include "comm/backends/mpi/mpi_check.h"
#include "comm/rendezvous/tcp_store.h"
#endif

namespace engine::comm {

#ifdef ENGINE_WITH_MPI

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// An IPv4 address of this host that is not a loopback address: the hostname's, else the first
// interface's that is up; "" when there is none.
std::string reachable_address() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  std::string found;
  if (getaddrinfo(host, nullptr, &hints, &res) == 0) {
    for (addrinfo* a = res; a && found.empty(); a = a->ai_next) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      found = text;
    }
    freeaddrinfo(res);
  }
  ifaddrs* ifs = nullptr;
  if (!found.empty() || getifaddrs(&ifs) != 0) return found;
  for (ifaddrs* i = ifs; i && found.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof text);
    found = text;
  }
  freeifaddrs(ifs);
  return found;
}

// Where rank 0's store listens for the others.
std::string store_host(const std::string& bind_address, int world) {
  if (!bind_address.empty() && bind_address != "0.0.0.0") return bind_address;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local && std::atoi(local) == world) return "127.0.0.1";  // every rank on this host
  const std::string addr = reachable_address();
  ENGINE_CHECK(!addr.empty(),
               "rendezvous through MPI: this host has no address other hosts could reach (only "
               "loopback): name rank 0's store with mpirun -x MASTER_ADDR=<host> -x "
               "MASTER_PORT=<port>");
  return addr;
}

// Rank 0: starts the store and says where it is ("host:port"), or why it could not ("!why").
std::string serve_store(Millis timeout, const std::string& bind_address, int world,
                        std::shared_ptr<Store>* store) {
  try {
    const std::string host = store_host(bind_address, world);
    auto tcp = std::make_shared<TcpStore>(host, 0, true, timeout, bind_address);
    *store = tcp;
    return host + ":" + std::to_string(tcp->port());
  } catch (const std::exception& e) {
    return std::string("!") + e.what();
  }
}

}  // namespace

std::shared_ptr<Store> meet_through_mpi(Millis timeout, const std::string& bind_address) {
  mpi_init();
  const int rank = world_rank();
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const char* env_world = std::getenv("OMPI_COMM_WORLD_SIZE");
  ENGINE_CHECK(env_world && std::atoi(env_world) == world,
               "rendezvous through MPI: MPI's world has ", world,
               " process(es) but OMPI_COMM_WORLD_SIZE is ", env_world ? env_world : "not set");
  std::shared_ptr<Store> store;
  std::array<char, 512> where{};
  if (rank == 0) {
    const std::string s = serve_store(timeout, bind_address, world, &store);
    std::strncpy(where.data(), s.c_str(), where.size() - 1);
  }
  {
    CallWatchdog watchdog([rank](const WatchedCall& c) { mpi_call_expired(rank, c); });
    Fingerprint fp;
    fp.op = CollOp::Broadcast;
    fp.dtype = DType::U8;
    fp.count = where.size();
    fp.root = 0;
    WatchScope watch(&watchdog, {"MPI_Bcast of the rendezvous store's address", fp, timeout});
    mpi_check(MPI_Bcast(where.data(), static_cast<int>(where.size()), MPI_CHAR, 0, MPI_COMM_WORLD),
              "MPI_Bcast of the rendezvous store's address", rank);
  }
  const std::string got(where.data());
  if (!got.empty() && got[0] == '!')
    ENGINE_FAIL(rank == 0 ? "" : "rank 0 could not serve the rendezvous store: ", got.substr(1));
  if (rank == 0) return store;
  const size_t colon = got.rfind(':');
  ENGINE_CHECK(colon != std::string::npos, "rendezvous through MPI: rank 0 sent '", got,
               "', not host:port");
  return std::make_shared<TcpStore>(got.substr(0, colon), std::stoi(got.substr(colon + 1)), false,
                                    timeout);
}

#else  // no MPI

std::shared_ptr<Store> meet_through_mpi(Millis, const std::string&) {
  ENGINE_FAIL(
      "env:// under mpirun: MASTER_ADDR and MASTER_PORT are not set, and the ranks cannot meet "
      "through MPI because ",
      mpi_build_hint(),
      "; or name rank 0's store: mpirun -x MASTER_ADDR=<host> -x MASTER_PORT=<port>");
}

#endif  // ENGINE_WITH_MPI

}  // namespace engine::comm
