// comm/transport/socket.cpp: see socket.h.
#include "comm/transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace engine::comm {

std::string errno_str(int err) {
  char buf[128];
  const char* s = strerror_r(err, buf, sizeof buf);
  return s;
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown_both() noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

static std::string addr_str(const sockaddr_storage& ss, bool with_port) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return with_port ? std::string(host) + ":" + std::to_string(port) : std::string(host);
}

int Socket::local_port() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

std::string Socket::local_host() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return addr_str(ss, false);
}

std::string Socket::peer_str() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return addr_str(ss, true);
}

static void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static addrinfo* resolve(const std::string& host, int port, bool passive, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  const char* h = host.empty() ? nullptr : host.c_str();
  int rc = getaddrinfo(h, service.c_str(), &hints, &res);
  if (rc != 0) ENGINE_FAIL(what, ": cannot resolve host '", host, "': ", gai_strerror(rc));
  return res;
}

bool is_any_address(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

Socket listen_tcp(const std::string& host_in, int port, const std::string& what) {
  std::string host = host_in == "0.0.0.0" ? "" : host_in == "[::]" ? "::" : host_in;
  // With no host, prefer IPv4 "any" so that IPv4-only peers reach us.
  if (host.empty()) host = "0.0.0.0";
  addrinfo* res = resolve(host, port, true, what);
  int last_err = 0;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_err = errno;
      continue;
    }
    Socket s(fd);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      last_err = errno;
      continue;
    }
    set_nonblocking(fd);
    freeaddrinfo(res);
    return s;
  }
  freeaddrinfo(res);
  if (last_err == EADDRINUSE)
    ENGINE_FAIL(what, ": port ", port, " on ", host,
                " is already in use (EADDRINUSE): another job or an earlier run still holds it; "
                "pick another port (MASTER_PORT / tcp://host:PORT) or stop that process");
  if (last_err == EADDRNOTAVAIL)
    ENGINE_FAIL(what, ": cannot listen on ", host, ":", port,
                ": not an address of this host (EADDRNOTAVAIL); MASTER_ADDR (or tcp://HOST) must "
                "name an interface of rank 0's host, or 0.0.0.0 / :: for every interface");
  ENGINE_FAIL(what, ": cannot listen on ", host, ":", port, ": ", errno_str(last_err));
}

Socket accept_tcp(const Socket& listener) {
  int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return Socket();
  return Socket(fd);
}

static bool wait_fd(int fd, short events, Deadline deadline) {
  pollfd p{fd, events, 0};
  while (true) {
    int rc = poll(&p, 1, deadline.poll_ms(100));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the I/O call report the error
    if (deadline.expired()) return false;
  }
}

Socket connect_tcp(const std::string& host, int port, Deadline deadline, const std::string& what) {
  std::string last = "timed out";
  int backoff_ms = 5;
  while (true) {
    addrinfo* res = nullptr;
    try {
      res = resolve(host, port, false, what);
    } catch (const Error& e) {
      last = e.what();
    }
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      Socket s(fd);
      set_nonblocking(fd);
      int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        if (!wait_fd(fd, POLLOUT, deadline)) {
          last = "connect timed out";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc == 0) {
        freeaddrinfo(res);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return s;
      }
      last = errno_str(errno);
    }
    if (res) freeaddrinfo(res);
    if (deadline.expired())
      throw TimeoutError(detail::concat(what, ": could not connect to ", host, ":", port,
                                        " within ", seconds_str(deadline.timeout()), " (", last,
                                        ")"));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min<long long>(backoff_ms, deadline.remaining().count())));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
}

void send_all(const Socket& s, const void* data, size_t nbytes, Deadline deadline,
              const std::string& who) {
  auto* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    ssize_t n = ::send(s.fd(), p, nbytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      nbytes -= n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_fd(s.fd(), POLLOUT, deadline))
        throw TimeoutError(detail::concat("sending to ", who, " timed out after ",
                                          seconds_str(deadline.timeout())));
      continue;
    }
    ENGINE_FAIL("sending to ", who, " failed: ", errno_str(errno),
                " (the connection is closed: did it exit?)");
  }
}

void recv_all(const Socket& s, void* data, size_t nbytes, Deadline deadline,
              const std::string& who) {
  auto* p = static_cast<char*>(data);
  while (nbytes > 0) {
    ssize_t n = ::recv(s.fd(), p, nbytes, 0);
    if (n > 0) {
      p += n;
      nbytes -= n;
      continue;
    }
    if (n == 0) ENGINE_FAIL(who, " closed the connection (EOF): did it exit or crash?");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_fd(s.fd(), POLLIN, deadline))
        throw TimeoutError(detail::concat("waiting for ", who, " timed out after ",
                                          seconds_str(deadline.timeout())));
      continue;
    }
    ENGINE_FAIL("receiving from ", who, " failed: ", errno_str(errno));
  }
}

void tune_data_socket(const Socket& s) {
  int one = 1;
  setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Kernel buffer sizes are left to Linux's autotuning: setting SO_RCVBUF would switch it off.
}

}  // namespace engine::comm
