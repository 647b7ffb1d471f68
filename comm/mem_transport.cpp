// comm/mem_transport.cpp: see mem_transport.h.
#include "comm/mem_transport.h"

#include <sys/mman.h>

#include <thread>

#include "comm/shm_ring.h"
#include "comm/socket.h"
#include "core/error.h"

namespace engine::comm {

int default_spin_us(int ranks_on_host) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return ranks_on_host <= cores ? 50 : 0;
}

std::vector<std::shared_ptr<Transport>> make_mem_transports(int world) {
  ENGINE_CHECK(world >= 1, "make_mem_transports: world size ", world);
  FabricLayout layout(world, kCollRingBytes, kP2PRingBytes);
  void* base =
      mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    ENGINE_FAIL("mem transport: mmap of ", layout.total, " bytes failed: ", errno_str(errno));
  layout.init(base);
  const size_t total = layout.total;
  std::shared_ptr<void> mapping(base, [total](void* p) { munmap(p, total); });
  auto* b = static_cast<char*>(base);
  std::vector<std::shared_ptr<Transport>> out;
  for (int r = 0; r < world; ++r) {
    auto t = std::make_shared<Transport>(r, world, "mem");
    for (int p = 0; p < world; ++p) {
      if (p == r) continue;
      for (int s = 0; s < 2; ++s) {
        auto* tx = reinterpret_cast<RingHeader*>(b + layout.ring(r, p, s));
        auto* rx = reinterpret_cast<RingHeader*>(b + layout.ring(p, r, s));
        auto* bell = reinterpret_cast<Doorbell*>(b + layout.bell(p));
        t->set_channel(p, static_cast<Stream>(s), std::make_unique<RingChannel>(tx, rx, bell));
      }
    }
    t->set_doorbell(reinterpret_cast<Doorbell*>(b + layout.bell(r)));
    t->set_spin_us(default_spin_us(world));
    t->keep_alive(mapping);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<std::unique_ptr<Communicator>> make_mem_communicators(int world, CommOptions opts) {
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& t : make_mem_transports(world)) {
    out.push_back(std::make_unique<Communicator>(t, opts));
    out.back()->set_local(t->rank(), world);
  }
  return out;
}

}  // namespace engine::comm
