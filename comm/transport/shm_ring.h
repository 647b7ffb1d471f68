// comm/transport/shm_ring.h: single-producer single-consumer byte rings and doorbells in memory
// that several ranks map (shared memory between processes, or plain heap for ranks as threads), and
// the channel built from two rings. A waiting rank sleeps on its own doorbell (a futex word);
// whoever writes to it, or frees room in a ring it writes, rings that doorbell. One doorbell per
// rank lets a rank wait on all its peers at once.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/transport/channel.h"

namespace engine::comm {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> waiting{0};
  char pad[56];

  void ring() noexcept;
  // Sleeps until seq differs from `seen` or `timeout_us` passes (spurious wake-ups allowed).
  void sleep(uint32_t seen, long timeout_us) noexcept;
};

struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint64_t> head{0};    // bytes ever written (producer)
  alignas(64) std::atomic<uint64_t> tail{0};    // bytes ever read (consumer)
  alignas(64) std::atomic<uint32_t> closed{0};  // set by either side on close
  uint64_t capacity = 0;                        // data bytes after the header, a multiple of 64
};

// Where each rank's doorbell and each directed ring (src -> dst, stream) lie in one region, for
// `n` ranks (indices 0..n-1 inside the region) and 2 streams.
struct FabricLayout {
  int n = 0;
  size_t ring_bytes[2] = {0, 0};
  size_t bells_offset = 0;
  size_t rings_offset = 0;
  size_t total = 0;
  FabricLayout(int n, size_t coll_ring_bytes, size_t p2p_ring_bytes);
  size_t bell(int i) const { return bells_offset + i * sizeof(Doorbell); }
  size_t ring(int src, int dst, int stream) const;
  // Constructs the headers in freshly zeroed memory.
  void init(void* base) const;
};

class RingChannel : public Channel {
 public:
  // tx: this rank writes, the peer reads; rx: the other way. peer_bell wakes the peer.
  RingChannel(RingHeader* tx, RingHeader* rx, Doorbell* peer_bell);
  ~RingChannel() override { close(); }
  size_t writev_some(const iovec* iov, int iovcnt) override;
  size_t read_some(void* dst, size_t n) override;
  bool can_peek() const override { return true; }
  std::pair<const std::byte*, size_t> peek() override;
  void consume(size_t n) override;
  size_t peek_at(size_t offset, void* dst, size_t n) override;
  void mark_peer_dead() override { peer_dead_ = true; }
  void close() noexcept override;

 private:
  RingHeader* tx_;
  RingHeader* rx_;
  Doorbell* peer_bell_;
  bool peer_dead_ = false;
  bool closed_ = false;
};

}  // namespace engine::comm
