// comm/backends/mpi/mpi_launch.cpp: what every build knows about MPI
// (comm/backends/mpi/mpi_world.h): whether it is built in, how to build it in, and whether mpirun
// started this process.
#include <cstdlib>

#include "comm/backends/mpi/mpi_world.h"

namespace engine::comm {

bool mpi_built() {
#ifdef ENGINE_WITH_MPI
  return true;
#else
  return false;
#endif
}

const char* mpi_build_hint() {
  return "this build has no MPI: install Open MPI (Debian: apt-get install libopenmpi-dev "
         "openmpi-bin) and configure again (cmake -DENGINE_MPI=ON; the default AUTO finds it)";
}

bool started_by_mpirun() {
  // OMPI_COMM_WORLD_* alone may be set by hand (tests); mpirun also gives every process its PMIx
  // server, which MPI_Init needs to find the other ranks.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) return false;
  }
  return true;
}

}  // namespace engine::comm
