// comm/transport/shm_ring.cpp: see shm_ring.h. The doorbell protocol (no lost wake-ups):
//   sleeper: seen = seq; look for work; waiting = 1; if seq == seen: futex_wait(seq, seen); waiting
//   = 0 ringer:  seq += 1; if waiting: futex_wake(seq)
// Both sides use sequentially consistent operations, so either the ringer sees waiting = 1 or the
// sleeper sees the new seq.
#include "comm/transport/shm_ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

namespace engine::comm {

static_assert(sizeof(Doorbell) == 64);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

void Doorbell::ring() noexcept {
  seq.fetch_add(1);
  if (waiting.load())
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void Doorbell::sleep(uint32_t seen, long timeout_us) noexcept {
  waiting.store(1);
  if (seq.load() == seen) {
    timespec ts{timeout_us / 1000000, (timeout_us % 1000000) * 1000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  waiting.store(0);
}

static size_t round64(size_t n) {
  return (n + 63) / 64 * 64;
}

FabricLayout::FabricLayout(int n_, size_t coll_ring_bytes, size_t p2p_ring_bytes) : n(n_) {
  ring_bytes[0] = round64(coll_ring_bytes);
  ring_bytes[1] = round64(p2p_ring_bytes);
  bells_offset = 0;
  rings_offset = round64(n * sizeof(Doorbell));
  size_t per_pair = 2 * sizeof(RingHeader) + ring_bytes[0] + ring_bytes[1];
  total = rings_offset + static_cast<size_t>(n) * n * per_pair;
}

size_t FabricLayout::ring(int src, int dst, int stream) const {
  size_t per_pair = 2 * sizeof(RingHeader) + ring_bytes[0] + ring_bytes[1];
  size_t off = rings_offset + (static_cast<size_t>(src) * n + dst) * per_pair;
  if (stream == 1) off += sizeof(RingHeader) + ring_bytes[0];
  return off;
}

void FabricLayout::init(void* base) const {
  auto* b = static_cast<char*>(base);
  for (int i = 0; i < n; ++i) new (b + bell(i)) Doorbell();
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      for (int st = 0; st < 2; ++st) {
        auto* h = new (b + ring(s, d, st)) RingHeader();
        h->capacity = ring_bytes[st];
      }
    }
}

static std::byte* ring_data(RingHeader* h) {
  return reinterpret_cast<std::byte*>(h + 1);
}

RingChannel::RingChannel(RingHeader* tx, RingHeader* rx, Doorbell* peer_bell)
    : tx_(tx), rx_(rx), peer_bell_(peer_bell) {}

size_t RingChannel::writev_some(const iovec* iov, int iovcnt) {
  if (tx_->closed.load(std::memory_order_acquire))
    throw ChannelError("closed its end of the shared-memory channel");
  const uint64_t cap = tx_->capacity;
  const uint64_t head = tx_->head.load(std::memory_order_relaxed);
  const uint64_t tail = tx_->tail.load(std::memory_order_acquire);
  uint64_t room = cap - (head - tail);
  if (room == 0) {
    if (peer_dead_) throw ChannelError("is gone (its process exited; the liveness socket closed)");
    return 0;
  }
  std::byte* data = ring_data(tx_);
  uint64_t pos = head;
  size_t written = 0;
  for (int i = 0; i < iovcnt && room > 0; ++i) {
    auto* src = static_cast<const std::byte*>(iov[i].iov_base);
    size_t n = std::min<uint64_t>(iov[i].iov_len, room);
    size_t off = pos % cap;
    size_t first = std::min<size_t>(n, cap - off);
    std::memcpy(data + off, src, first);
    if (first < n) std::memcpy(data, src + first, n - first);
    pos += n;
    room -= n;
    written += n;
    if (n < iov[i].iov_len) break;
  }
  if (written) {
    tx_->head.store(pos, std::memory_order_release);
    peer_bell_->ring();
  }
  return written;
}

std::pair<const std::byte*, size_t> RingChannel::peek() {
  const uint64_t cap = rx_->capacity;
  const uint64_t tail = rx_->tail.load(std::memory_order_relaxed);
  const uint64_t head = rx_->head.load(std::memory_order_acquire);
  uint64_t avail = head - tail;
  if (avail == 0) {
    const bool closed = rx_->closed.load(std::memory_order_acquire);
    if (!closed && !peer_dead_) return {nullptr, 0};
    // The peer may have written its last bytes between the head's load above and its close (a
    // barrier's last message, then exit): the close was released after them, so look again.
    avail = rx_->head.load(std::memory_order_acquire) - tail;
    if (avail == 0 && closed)
      throw ChannelError("closed the shared-memory channel (end of stream): did it exit?");
    if (avail == 0) throw ChannelError("is gone (its process exited; the liveness socket closed)");
  }
  size_t off = tail % cap;
  return {ring_data(rx_) + off, std::min<uint64_t>(avail, cap - off)};
}

void RingChannel::consume(size_t n) {
  if (n == 0) return;
  rx_->tail.store(rx_->tail.load(std::memory_order_relaxed) + n, std::memory_order_release);
  peer_bell_->ring();
}

size_t RingChannel::peek_at(size_t offset, void* dst, size_t n) {
  const uint64_t cap = rx_->capacity;
  const uint64_t tail = rx_->tail.load(std::memory_order_relaxed);
  const uint64_t avail = rx_->head.load(std::memory_order_acquire) - tail;
  if (offset >= avail) return 0;
  n = std::min<uint64_t>(n, avail - offset);
  const std::byte* data = ring_data(rx_);
  auto* d = static_cast<std::byte*>(dst);
  for (size_t i = 0; i < n;) {
    size_t off = (tail + offset + i) % cap;
    size_t k = std::min<size_t>(n - i, cap - off);
    std::memcpy(d + i, data + off, k);
    i += k;
  }
  return n;
}

size_t RingChannel::read_some(void* dst, size_t n) {
  auto* d = static_cast<std::byte*>(dst);
  size_t got = 0;
  while (got < n) {
    auto [p, len] = got == 0 ? peek() : std::pair<const std::byte*, size_t>{nullptr, 0};
    if (got > 0) {
      // Second contiguous piece after a wrap; never throws for an empty ring.
      const uint64_t cap = rx_->capacity;
      const uint64_t tail = rx_->tail.load(std::memory_order_relaxed);
      const uint64_t avail = rx_->head.load(std::memory_order_acquire) - tail;
      if (avail == 0) break;
      p = ring_data(rx_) + tail % cap;
      len = std::min<uint64_t>(avail, cap - tail % cap);
    }
    if (len == 0) break;
    size_t k = std::min(len, n - got);
    std::memcpy(d + got, p, k);
    rx_->tail.store(rx_->tail.load(std::memory_order_relaxed) + k, std::memory_order_release);
    got += k;
  }
  if (got) peer_bell_->ring();
  return got;
}

void RingChannel::close() noexcept {
  if (closed_) return;
  closed_ = true;
  tx_->closed.store(1, std::memory_order_release);
  rx_->closed.store(1, std::memory_order_release);
  peer_bell_->ring();
}

}  // namespace engine::comm
