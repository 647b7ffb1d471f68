// comm/transport/shm_transport.cpp: see shm_transport.h.
#include "comm/transport/shm_transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "comm/transport/mem_transport.h"
#include "comm/transport/socket.h"
#include "core/error.h"

namespace engine::comm {

ShmFabric open_shm_fabric(Store& store, const std::string& key_prefix,
                          const std::vector<int>& local_ranks, int rank, uint64_t nonce,
                          Deadline deadline) {
  ShmFabric f;
  auto it = std::find(local_ranks.begin(), local_ranks.end(), rank);
  ENGINE_CHECK(it != local_ranks.end(), "shm: rank ", rank, " is not among the local ranks");
  f.index = static_cast<int>(it - local_ranks.begin());
  const int leader = local_ranks[0];
  f.layout = FabricLayout(static_cast<int>(local_ranks.size()), kCollRingBytes, kP2PRingBytes);
  const size_t total = f.layout.total;
  char name[64];
  snprintf(name, sizeof name, "/engine-%016llx-%d", static_cast<unsigned long long>(nonce), leader);
  const std::string name_key = key_prefix + "shm/" + std::to_string(leader);

  int fd;
  if (rank == leader) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) ENGINE_FAIL("shm: cannot create ", name, ": ", errno_str(errno));
    if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
      int err = errno;
      close(fd);
      shm_unlink(name);
      ENGINE_FAIL("shm: cannot size ", name, " to ", total, " bytes: ", errno_str(err));
    }
  } else {
    store.wait({name_key}, deadline.remaining());
    std::string got = store.get(name_key);
    fd = shm_open(got.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) ENGINE_FAIL("shm: rank ", rank, " cannot open ", got, ": ", errno_str(errno));
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int map_err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    if (rank == leader) shm_unlink(name);
    ENGINE_FAIL("shm: mmap of ", total, " bytes failed: ", errno_str(map_err));
  }
  f.mapping = std::shared_ptr<void>(base, [total](void* p) { munmap(p, total); });
  f.base = static_cast<char*>(base);

  if (rank == leader) {
    f.layout.init(base);
    store.set(name_key, name);
    std::vector<std::string> keys;
    for (size_t i = 1; i < local_ranks.size(); ++i)
      keys.push_back(key_prefix + "shm_mapped/" + std::to_string(local_ranks[i]));
    try {
      store.wait(keys, deadline.remaining());
    } catch (...) {
      shm_unlink(name);
      throw;
    }
    shm_unlink(name);
  } else {
    store.set(key_prefix + "shm_mapped/" + std::to_string(rank), "1");
  }
  return f;
}

}  // namespace engine::comm
