// comm/rendezvous/mpi_meet.h: the ranks meet through MPI (the env:// rendezvous under mpirun with
// neither MASTER_ variable set, comm/rendezvous/rendezvous.h). MPI's life in the process is
// comm/backends/mpi/mpi_world.h's.
#pragma once
#include <memory>
#include <string>

#include "comm/base/deadline.h"
#include "comm/base/store.h"

namespace engine::comm {

// env:// under mpirun with no MASTER_ADDR/MASTER_PORT: the ranks meet through MPI. MPI rank 0
// serves the TCP store on a free port of an address the others reach (bind_address if set; else
// 127.0.0.1 when every rank is on its host, else its hostname's address) and MPI_Bcast's
// "host:port"; every rank returns a client of that store. The broadcast is bounded by timeout.
std::shared_ptr<Store> meet_through_mpi(Millis timeout, const std::string& bind_address);

}  // namespace engine::comm
