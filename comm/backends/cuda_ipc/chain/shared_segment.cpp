// comm/backends/cuda_ipc/chain/shared_segment.cpp: see shared_segment.h.
#include "comm/backends/cuda_ipc/chain/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

#include "comm/transport/socket.h"  // errno_str
#include "core/error.h"

namespace engine::comm::ipc::chain {

void SharedSegment::create(const std::string& name, int world) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    ENGINE_FAIL("ipc_ring (events) on rank 0: cannot create ", name, ": ", errno_str(errno));
  void* p = MAP_FAILED;
  int err = 0;
  if (ftruncate(fd, sizeof(Shared)) == 0)
    p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    ENGINE_FAIL("ipc_ring (events) on rank 0: cannot size and map ", name, ": ", errno_str(err));
  }
  shared_ = static_cast<Shared*>(p);  // zero-filled: every counter at step 0
  shared_->world = world;
  store_release(shared_->magic, kSharedMagic);
}

void SharedSegment::open(const std::string& name, int rank, int world) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    ENGINE_FAIL("ipc_ring (events) on rank ", rank, ": cannot open rank 0's segment ", name, ": ",
                errno_str(errno));
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED)
    ENGINE_FAIL("ipc_ring (events) on rank ", rank, ": cannot map ", name, ": ", errno_str(err));
  shared_ = static_cast<Shared*>(p);
  ENGINE_CHECK(load_acquire(shared_->magic) == kSharedMagic && shared_->world == world,
               "ipc_ring (events) on rank ", rank, ": rank 0's segment ", name,
               " is not a ring of ", world, " ranks");
}

SharedSegment::SharedSegment(Store& store, const std::string& key, int rank, int world,
                             Millis timeout) {
  ENGINE_CHECK(world >= 1 && world <= kMaxRanks, "ipc_ring (events) on rank ", rank, ": ", world,
               " ranks, at most ", kMaxRanks);
  const std::string name_key = key + "/shm";
  if (rank != 0) {
    try {
      store.wait({name_key}, timeout);
    } catch (const TimeoutError& e) {
      throw TimeoutError(detail::concat("ipc_ring (events) on rank ", rank,
                                        ": rank 0 did not publish its shared segment within ",
                                        seconds_str(timeout), ": ", e.what()));
    }
    open(store.get(name_key), rank, world);
    store.set(key + "/mapped/" + std::to_string(rank), "1");
    return;
  }
  char name[64];
  std::snprintf(name, sizeof name, "/engine-chain-%d-%08x", static_cast<int>(getpid()),
                static_cast<unsigned>(std::random_device{}()));
  create(name, world);
  store.set(name_key, name);
  for (int q = 1; q < world; ++q) {  // the name goes once every rank mapped it
    try {
      store.wait({key + "/mapped/" + std::to_string(q)}, timeout);
    } catch (const TimeoutError& e) {
      shm_unlink(name);
      munmap(shared_, sizeof(Shared));
      shared_ = nullptr;
      throw TimeoutError(detail::concat("ipc_ring (events) on rank 0: rank ", q,
                                        " did not map the shared segment within ",
                                        seconds_str(timeout), ": ", e.what()));
    }
  }
  shm_unlink(name);
}

SharedSegment::~SharedSegment() {
  if (shared_) munmap(shared_, sizeof(Shared));
}

}  // namespace engine::comm::ipc::chain
