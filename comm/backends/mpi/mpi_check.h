// comm/backends/mpi/mpi_check.h: what comm/backends/mpi/mpi_world.cpp and
// comm/backends/mpi/mpi_backend.cpp share. Only in builds with MPI (ENGINE_WITH_MPI), where mpi.h
// is on the include path.
#pragma once
#ifdef ENGINE_WITH_MPI
// MPI's C API only: without these, mpi.h of C++ code pulls in the removed C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "comm/health/call_watchdog.h"

namespace engine::comm {

// Throws engine::Error "<what> failed on rank R: <MPI_Error_string>" unless rc is MPI_SUCCESS.
void mpi_check(int rc, const char* what, int rank);
// The watchdog's expiry for MPI calls: prints which call of which rank overran and ends the job.
[[noreturn]] void mpi_call_expired(int rank, const WatchedCall& c);

}  // namespace engine::comm

#endif  // ENGINE_WITH_MPI
