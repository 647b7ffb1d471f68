// comm/transport/mem_transport.h: ranks as threads of one process - the shared-memory ring channels
// on ordinary (anonymous) memory, no store and no sockets. For tests of the algorithms (as gloo's
// in-memory tests) and for tools that simulate W ranks in one process. Wrapped in
// communicators: make_mem_communicators (comm/rendezvous/rendezvous.h).
#pragma once
#include <memory>
#include <vector>

#include "comm/transport/transport.h"

namespace engine::comm {

// Ring sizes of the memory fabrics (mem and shm): collectives, point-to-point.
constexpr size_t kCollRingBytes = 2 << 20;
constexpr size_t kP2PRingBytes = 256 << 10;

// Transports for ranks 0..world-1, all connected; hand transports[r] to the thread of rank r.
std::vector<std::shared_ptr<Transport>> make_mem_transports(int world);

// How a waiting rank spins before it sleeps on its doorbell or in poll(): pausing for a few tens
// of microseconds when every rank on the host has a core of its own; else, on memory rings,
// yielding the core (to the rank it waits for, most likely) for a while; else not at all.
void set_default_spin(Transport& t, int ranks_on_host, bool rings);

}  // namespace engine::comm
