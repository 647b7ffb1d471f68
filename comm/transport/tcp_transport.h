// comm/transport/tcp_transport.h: TCP channels and the full mesh of connections between ranks. Each
// rank listens on one data port (bind address settable) and publishes host:port in the store; rank
// r connects to every lower rank and accepts every higher one. A connection opens with a 32-byte
// hello (magic, version, the job's nonce, from, to, index); anything else - garbage bytes, a
// stranger, a rank of another job - is refused and logged on stderr, and set-up goes on.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/transport/channel.h"
#include "comm/transport/socket.h"

namespace engine::comm {

class SocketChannel : public Channel {
 public:
  explicit SocketChannel(Socket s);
  ~SocketChannel() override;
  size_t writev_some(const iovec* iov, int iovcnt) override;
  size_t read_some(void* dst, size_t n) override;
  size_t peek_at(size_t offset, void* dst, size_t n) override;
  int poll_fd() const override { return sock_.fd(); }
  void mark_peer_dead() override { peer_closed_ = true; }
  // Half-closes (FIN after the bytes already written): the fd stays open until destruction, so
  // that the peer reads what was sent (an Abort frame) before it sees the end.
  void close() noexcept override;

 private:
  Socket sock_;
  bool peer_closed_ = false;
  bool closed_ = false;
};

struct MeshPeer {
  std::string host;  // address to connect to
  int port = 0;
  int sockets = 0;  // connections wanted with this peer (0 for ourselves)
};

// Returns sockets[p][i] for every peer p and i < peers[p].sockets. The listener is closed after.
std::vector<std::vector<Socket>> connect_mesh(int rank, uint64_t nonce, Socket& listener,
                                              const std::vector<MeshPeer>& peers,
                                              Deadline deadline);

}  // namespace engine::comm
