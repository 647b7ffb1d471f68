// comm/transport/socket.h: thin RAII TCP sockets for the store and the TCP transport. Every socket
// is non-blocking; every blocking helper takes a Deadline and waits with poll(). Writes use
// MSG_NOSIGNAL so that a closed peer is an error, never a SIGPIPE.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <string>

#include "comm/base/deadline.h"

namespace engine::comm {

std::string errno_str(int err);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close() noexcept;
  void shutdown_both() noexcept;

  int local_port() const;
  std::string local_host() const;  // numeric address of this end
  std::string peer_str() const;    // "1.2.3.4:5678" of the other end

 private:
  int fd_ = -1;
};

// Whether host means every interface: "", "0.0.0.0", "::" or "[::]".
bool is_any_address(const std::string& host);

// Listens on host:port (port 0 = any free port). host "" or "0.0.0.0" = all interfaces (IPv4),
// "::" all interfaces of IPv6 (and IPv4, where the system maps it).
// `what` names the port in errors ("rendezvous store", "data port of rank 2").
Socket listen_tcp(const std::string& host, int port, const std::string& what);
// Accepts one pending connection, or returns an invalid Socket if none is pending.
Socket accept_tcp(const Socket& listener);
// Connects, retrying refused connections until the deadline (the peer may not listen yet).
Socket connect_tcp(const std::string& host, int port, Deadline deadline, const std::string& what);

// Whole-buffer transfers. `who` names the other end in errors ("rank 3", "the store at h:p").
// recv_all on EOF throws engine::Error "... closed the connection".
void send_all(const Socket& s, const void* data, size_t nbytes, Deadline deadline,
              const std::string& who);
void recv_all(const Socket& s, void* data, size_t nbytes, Deadline deadline,
              const std::string& who);

// Tunes a data socket: TCP_NODELAY.
void tune_data_socket(const Socket& s);

}  // namespace engine::comm
