// comm/backends/mpi/mpi_backend.h: the MPI backend (mpi_backend.cpp), in builds
// that have MPI (comm/backends/mpi/mpi_world.h says; without it, making one throws).
#pragma once
#include <memory>

#include "comm/backends/backend.h"
#include "comm/base/deadline.h"

namespace engine::comm {

// Every collective of the Communicator (CPU tensors and raw host buffers; CUDA
// tensors staged through host memory) on MPI, on a communicator of its own that orders the MPI
// processes by `rank` (the Communicator's). Every rank calls it together. Each call is watched:
// one that has not returned after its context's timeout ends the job, naming the call. Throws when
// MPI's world is not these `world` ranks (e.g. ranks not started by mpirun).
std::unique_ptr<Backend> make_mpi_backend(int rank, int world, Millis timeout);

}  // namespace engine::comm
