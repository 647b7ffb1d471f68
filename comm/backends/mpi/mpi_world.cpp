// comm/backends/mpi/mpi_world.cpp: MPI's life in a process (comm/backends/mpi/mpi_world.h) and what
// the MPI backend and the rendezvous through MPI share (mpi_check.h), in builds with MPI.
#ifdef ENGINE_WITH_MPI

#include "comm/backends/mpi/mpi_world.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "comm/backends/mpi/mpi_check.h"
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
                           " did not finish within its timeout of ", seconds_str(c.timeout),
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

}  // namespace engine::comm

#endif  // ENGINE_WITH_MPI
