// comm/backends/mpi/mpi_absent.cpp: comm/backends/mpi/mpi_world.h in a build without MPI. Nothing
// initialises MPI; what would need it throws engine::Error saying how to build with it.
#ifndef ENGINE_WITH_MPI

#include <cstdio>
#include <cstdlib>

#include "comm/backends/mpi/mpi_backend.h"
#include "comm/backends/mpi/mpi_world.h"
#include "core/error.h"

namespace engine::comm {

void mpi_init() {
  ENGINE_FAIL("MPI: ", mpi_build_hint());
}

void mpi_finalize() {}

std::string mpi_library_version() {
  return "";
}

void mpi_abort(const std::string& why) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", why.c_str());
  std::exit(1);
}

std::unique_ptr<Backend> make_mpi_backend(int, int, Millis) {
  ENGINE_FAIL("the MPI backend: ", mpi_build_hint());
}

}  // namespace engine::comm

#endif  // ENGINE_WITH_MPI
