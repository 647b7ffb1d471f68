// comm/backends/mpi/mpi_world.h: Open MPI as a launcher and as a library, in builds that have it
// (CMake ENGINE_MPI=AUTO|ON|OFF finds Debian's libopenmpi-dev; mpi_built() says). Without it every
// function below that needs MPI throws an engine::Error saying how to build with it.
//
// Life of MPI in a process: mpi_init() on first use (the env:// rendezvous under mpirun with no
// MASTER_ADDR/MASTER_PORT, or the MPI backend), with MPI_THREAD_MULTIPLE: the Communicator calls
// MPI from whichever thread runs a collective (one at a time) while a watchdog thread may call
// MPI_Abort. mpi_finalize() at a clean exit (apps/program.cpp: exit code 0). A process that exits
// any other way with MPI initialised calls MPI_Abort on its way out (atexit), so that mpirun stops
// the other ranks at once instead of leaving them waiting in a collective.
#pragma once
#include <memory>
#include <string>

namespace engine::comm {

// True when this build links MPI.
bool mpi_built();
// How to get a build with MPI, for error messages.
const char* mpi_build_hint();
// True when Open MPI's mpirun started this process (OMPI_COMM_WORLD_SIZE and PMIX_RANK are set).
bool started_by_mpirun();

// Initialises MPI once per process (later calls return at once).
void mpi_init();
// MPI_Finalize when mpi_init() ran and MPI is not finalized yet; otherwise nothing.
void mpi_finalize();
// "Open MPI v4.1.4" (the library's version line up to its first comma); "" before mpi_init().
std::string mpi_library_version();
// Prints why on stderr and ends the whole MPI job (MPI_Abort(MPI_COMM_WORLD, 1)).
[[noreturn]] void mpi_abort(const std::string& why);

}  // namespace engine::comm
