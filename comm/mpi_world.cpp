// comm/mpi_world.cpp: MPI's life in a process and the rendezvous through MPI (comm/mpi_world.h),
// in builds with MPI.
#ifdef ENGINE_WITH_MPI

#include "comm/mpi_world.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "comm/mpi_check.h"
#include "comm/tcp_store.h"
#include "core/error.h"

namespace engine::comm {

namespace {

std::mutex g_init_mu;

bool initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

// atexit: a process leaving with MPI still initialised did not finish cleanly (a clean exit
// finalizes first): end the job rather than leave the other ranks waiting.
void abort_unless_finalized() {
  if (!initialized()) return;
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace

void mpi_check(int rc, const char* what, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  ENGINE_FAIL(what, " failed on rank ", rank, ": ", text);
}

void mpi_call_expired(int rank, const WatchedCall& c) {
  mpi_abort(detail::concat("rank ", rank, ": ", c.what, " ", c.fp.str(),
                           " did not finish within --timeout ", seconds_str(c.timeout),
                           " (a rank stopped or called another collective): ending the MPI job"));
}

void mpi_init() {
  std::lock_guard lk(g_init_mu);
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  ENGINE_CHECK(!fin, "MPI was finalized already in this process: it cannot start again");
  if (init) return;
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  ENGINE_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed (error ", rc, ")");
  std::atexit(abort_unless_finalized);
  // One thread calls MPI at a time (the Communicator's order); the watchdog may call MPI_Abort
  // beside it, which MPI_THREAD_MULTIPLE allows.
  ENGINE_CHECK(provided >= MPI_THREAD_SERIALIZED, "MPI provides thread level ", provided,
               " only; the engine needs MPI_THREAD_SERIALIZED or more");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void mpi_finalize() {
  std::lock_guard lk(g_init_mu);
  if (initialized()) MPI_Finalize();
}

std::string mpi_library_version() {
  if (!initialized()) return "";
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, std::strlen(text));
  return s.substr(0, s.find_first_of(",\n"));
}

void mpi_abort(const std::string& why) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", why.c_str());
  std::fflush(stderr);
  if (initialized()) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

// ---------------------------------------------------------------------------------------------
// Rendezvous through MPI

namespace {

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

}  // namespace engine::comm

#endif  // ENGINE_WITH_MPI
