// comm/transport/mem_transport.cpp: see mem_transport.h.
#include "comm/transport/mem_transport.h"

#include <sys/mman.h>

#include <thread>

#include "comm/transport/shm_ring.h"
#include "comm/transport/socket.h"
#include "core/error.h"

namespace engine::comm {

void set_default_spin(Transport& t, int ranks_on_host, bool rings) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (ranks_on_host <= cores) {
    t.set_spin(50, false);
  } else if (rings) {
    // Measured with 4 ranks on 2 cores: tiny all_reduce 230 us sleeping at once, 30 us yielding
    // up to 200 us first.
    t.set_spin(200, true);
  } else {
    t.set_spin(0, false);  // sockets: yielding starves the kernel's loopback work
  }
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
        t->set_channel(p, static_cast<Lane>(s), std::make_unique<RingChannel>(tx, rx, bell));
      }
    }
    t->set_doorbell(reinterpret_cast<Doorbell*>(b + layout.bell(r)));
    set_default_spin(*t, world, true);
    t->keep_alive(mapping);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace engine::comm
