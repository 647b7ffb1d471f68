// comm/transport/tcp_transport.cpp: see tcp_transport.h.
#include "comm/transport/tcp_transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace engine::comm {

// ---------------------------------------------------------------------------------------------
// SocketChannel

SocketChannel::SocketChannel(Socket s) : sock_(std::move(s)) {
  tune_data_socket(sock_);
}

SocketChannel::~SocketChannel() {
  sock_.close();
}

size_t SocketChannel::writev_some(const iovec* iov, int iovcnt) {
  if (closed_) throw ChannelError("is no longer connected (this rank closed the channel)");
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = iovcnt;
  while (true) {
    ssize_t n = sendmsg(sock_.fd(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (peer_closed_) throw ChannelError("closed its connection (it aborted or exited)");
      return 0;
    }
    throw ChannelError("closed the connection (" + errno_str(errno) + "): did it exit or crash?");
  }
}

size_t SocketChannel::read_some(void* dst, size_t n) {
  if (n == 0) return 0;
  while (true) {
    ssize_t got = recv(sock_.fd(), dst, n, MSG_DONTWAIT);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) throw ChannelError("closed the connection (EOF): did it exit or crash?");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw ChannelError("closed the connection (" + errno_str(errno) + "): did it exit or crash?");
  }
}

size_t SocketChannel::peek_at(size_t offset, void* dst, size_t n) {
  constexpr size_t kMaxPeek = 8 << 20;
  if (offset + n > kMaxPeek) return 0;
  std::vector<char> buf(offset + n);
  ssize_t got = recv(sock_.fd(), buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
  if (got <= static_cast<ssize_t>(offset)) return 0;
  size_t k = std::min(n, static_cast<size_t>(got) - offset);
  std::memcpy(dst, buf.data() + offset, k);
  return k;
}

void SocketChannel::close() noexcept {
  if (closed_) return;
  closed_ = true;
  if (sock_.valid()) shutdown(sock_.fd(), SHUT_WR);
}

// ---------------------------------------------------------------------------------------------
// Mesh

namespace {

constexpr uint32_t kHelloMagic = 0x48474E45;  // "ENGH"
constexpr uint32_t kAckMagic = 0x41474E45;    // "ENGA"
constexpr uint32_t kVersion = 1;

struct Hello {
  uint32_t magic, version;
  uint64_t nonce;
  int32_t from, to, index, reserved;
};
static_assert(sizeof(Hello) == 32);

// A data port's bounds against strangers: a connection sends its 32-byte hello within 10 s of
// being accepted, at most 64 connections beyond the ones expected wait for theirs, and only the
// first 20 refusals are logged.
constexpr Millis kHelloTime{10000};
constexpr size_t kMaxStrangers = 64;
constexpr int kLoggedRefusals = 20;

struct Pending {
  Socket s;
  std::string who;
  Deadline until;
  Hello hello{};
  size_t got = 0;
};

void refuse(int rank, const std::string& who, const std::string& why) {
  static std::atomic<int> refusals{0};
  const int n = ++refusals;
  if (n <= kLoggedRefusals)
    fprintf(stderr, "[engine comm] rank %d refused a connection from %s on its data port: %s\n",
            rank, who.c_str(), why.c_str());
  if (n == kLoggedRefusals)
    fprintf(stderr, "[engine comm] rank %d: later refusals on its data port are not logged\n",
            rank);
}

// One rank's side of the mesh set-up: out[p][i] fills as connections are made or accepted.
struct Mesh {
  int rank;
  uint64_t nonce;
  const std::vector<MeshPeer>& peers;
  Deadline deadline;
  std::vector<std::vector<Socket>> out;

  int world() const { return static_cast<int>(peers.size()); }
  void connect_lower();
  void accept_higher(Socket& listener);
  // Reads what has arrived of c's hello: true when c is done with (accepted or refused).
  bool read_hello(Pending& c);
  // Why this hello is refused ("" when it is a wanted connection).
  std::string judge(const Hello& h) const;
  [[noreturn]] void timed_out() const;
};

void Mesh::connect_lower() {
  for (int p = 0; p < rank; ++p) {
    for (int i = 0; i < peers[p].sockets; ++i) {
      const std::string who = "rank " + std::to_string(p) + " (" + peers[p].host + ":" +
                              std::to_string(peers[p].port) + ")";
      Socket s = connect_tcp(peers[p].host, peers[p].port, deadline,
                             "rank " + std::to_string(rank) + " connecting to " + who);
      Hello h{kHelloMagic, kVersion, nonce, rank, p, i, 0};
      send_all(s, &h, sizeof h, deadline, who);
      uint32_t ack = 0;
      recv_all(s, &ack, sizeof ack, deadline, who);
      ENGINE_CHECK(ack == kAckMagic, "rank ", rank, ": ", who,
                   " answered with something that is not this engine's handshake");
      out[p][i] = std::move(s);
    }
  }
}

// Accepts from higher ranks, refusing whatever is not one of them.
void Mesh::accept_higher(Socket& listener) {
  int expected = 0;
  for (int p = rank + 1; p < world(); ++p) expected += peers[p].sockets;
  std::vector<Pending> pending;
  while (expected > 0) {
    std::vector<pollfd> fds{{listener.fd(), POLLIN, 0}};
    for (auto& c : pending) fds.push_back({c.s.fd(), POLLIN, 0});
    int rc = poll(fds.data(), fds.size(), deadline.poll_ms(100));
    if (rc < 0 && errno != EINTR) ENGINE_FAIL("rank ", rank, ": poll failed: ", errno_str(errno));
    if (deadline.expired() && rc == 0) timed_out();
    if (fds[0].revents & POLLIN) {
      while (true) {
        Socket s = accept_tcp(listener);
        if (!s.valid()) break;
        std::string who = s.peer_str();
        if (pending.size() >= static_cast<size_t>(expected) + kMaxStrangers) {
          refuse(rank, who, "too many connections waiting for their handshake");
          continue;
        }
        pending.push_back({std::move(s), who, Deadline::after(kHelloTime)});
      }
    }
    for (size_t k = 0; k < pending.size();) {
      const bool late = pending[k].until.expired();
      if (!read_hello(pending[k])) {
        if (!late) {
          ++k;
          continue;
        }
        refuse(rank, pending[k].who, "no handshake within 10 s (not a rank of this job)");
      }
      if (!pending[k].s.valid()) expected -= 1;  // moved into out
      pending.erase(pending.begin() + k);
    }
  }
  for (auto& c : pending) refuse(rank, c.who, "no handshake before the mesh was complete");
}

bool Mesh::read_hello(Pending& c) {
  ssize_t n = recv(c.s.fd(), reinterpret_cast<char*>(&c.hello) + c.got, sizeof(Hello) - c.got,
                   MSG_DONTWAIT);
  if (n == 0) {
    refuse(rank, c.who, "it closed without a complete handshake");
    return true;
  }
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    refuse(rank, c.who, errno_str(errno));
    return true;
  }
  c.got += n;
  // Judge the magic as soon as it is there, so garbage is refused without waiting.
  if (c.got >= 4 && c.hello.magic != kHelloMagic) {
    refuse(rank, c.who, "bad handshake bytes (not a rank of this job)");
    return true;
  }
  if (c.got < sizeof(Hello)) return false;
  const Hello& h = c.hello;
  const std::string why = judge(h);
  if (!why.empty()) {
    refuse(rank, c.who, why);
    return true;
  }
  uint32_t ack = kAckMagic;
  send_all(c.s, &ack, sizeof ack, deadline, "rank " + std::to_string(h.from));
  out[h.from][h.index] = std::move(c.s);
  return true;
}

std::string Mesh::judge(const Hello& h) const {
  if (h.version != kVersion) return "protocol version mismatch";
  if (h.nonce != nonce) return "it belongs to another job (nonce mismatch)";
  if (h.to != rank) return "it wanted rank " + std::to_string(h.to);
  if (h.from <= rank || h.from >= world()) return "bad rank " + std::to_string(h.from);
  if (h.index < 0 || h.index >= peers[h.from].sockets) return "bad connection index";
  if (out[h.from][h.index].valid()) return "duplicate connection";
  return "";
}

void Mesh::timed_out() const {
  std::string missing;
  for (int p = rank + 1; p < world(); ++p)
    for (auto& s : out[p])
      if (!s.valid()) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        break;
      }
  throw TimeoutError(detail::concat("rank ", rank, ": timed out after ",
                                    seconds_str(deadline.timeout()), " waiting for ranks [",
                                    missing, "] to connect"));
}

}  // namespace

std::vector<std::vector<Socket>> connect_mesh(int rank, uint64_t nonce, Socket& listener,
                                              const std::vector<MeshPeer>& peers,
                                              Deadline deadline) {
  Mesh m{rank, nonce, peers, deadline, std::vector<std::vector<Socket>>(peers.size())};
  for (size_t p = 0; p < peers.size(); ++p) m.out[p].resize(peers[p].sockets);
  m.connect_lower();
  m.accept_higher(listener);
  listener.close();
  return std::move(m.out);
}

}  // namespace engine::comm
