// comm/transport/channel.h: one direction-pair byte stream to one peer (a TCP socket, or two
// shared-memory rings). The Transport frames messages on top and drives channels without blocking;
// a channel only moves bytes and reports a dead or closed peer by throwing ChannelError.
#pragma once
#include <sys/uio.h>

#include <cstddef>
#include <utility>

#include "core/error.h"

namespace engine::comm {

// The peer is gone or the stream is broken. The message says how ("closed the connection (EOF)").
class ChannelError : public Error {
 public:
  using Error::Error;
};

class Channel {
 public:
  virtual ~Channel() = default;
  // Writes what fits now; returns the bytes written (0 = no room).
  virtual size_t writev_some(const iovec* iov, int iovcnt) = 0;
  // Reads what is there now, at most n bytes; returns the bytes read (0 = nothing yet).
  virtual size_t read_some(void* dst, size_t n) = 0;
  // Zero-copy reading, for channels that hold bytes in memory: the readable bytes that lie
  // contiguously (possibly fewer than are readable), then consume() what was used.
  virtual bool can_peek() const { return false; }
  virtual std::pair<const std::byte*, size_t> peek() { return {nullptr, 0}; }
  virtual void consume(size_t) {}
  // Copies up to n readable bytes starting `offset` bytes past the read position, consuming
  // nothing; returns the bytes copied (used to find a peer's Abort frame after it hung up).
  virtual size_t peek_at(size_t offset, void* dst, size_t n) = 0;
  // A file descriptor poll() can wait on (sockets), or -1 (memory rings wait on a doorbell).
  virtual int poll_fd() const { return -1; }
  // Told by the transport when the peer's process is known to be gone (lost liveness socket):
  // from then on, an empty read or a full write throws.
  virtual void mark_peer_dead() {}
  // Ends the stream both ways; the peer's reads see end-of-stream after what was written.
  virtual void close() noexcept = 0;
};

}  // namespace engine::comm
