// fuzz/fuzz_store.cpp: rank 0's rendezvous store (comm/rendezvous/tcp_store.h) on any bytes from a
// client: one server for the whole run; each input is one connection that sends the bytes (after
// the store's handshake when the first byte is even), closes its side, and reads whatever comes
// back for at most 100 ms. The server must refuse or answer, never crash, and keep within its
// bounds.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <vector>

#include "comm/rendezvous/tcp_store.h"

using namespace engine::comm;

namespace {

TcpStoreServer& server() {
  // Never destroyed: its threads may still be in a wait when the fuzzer exits.
  static TcpStoreServer* s = [] {
    std::signal(SIGPIPE, SIG_IGN);
    StoreLimits limits;
    limits.handshake = Millis(200);
    limits.request = Millis(200);
    return new TcpStoreServer("127.0.0.1", 0, limits);
  }();
  return *s;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    p += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int fd = connect_to(server().port());
  if (fd < 0) return 0;
  if ((data[0] & 1) == 0) {
    const uint32_t hello[2] = {0x53474E45, 1};  // the store's magic "ENGS" and version
    send_all(fd, reinterpret_cast<const uint8_t*>(hello), sizeof hello);
  }
  send_all(fd, data + 1, size - 1);
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  for (int waited = 0; waited < 100;) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 50) == 0) {
      waited += 50;
      continue;
    }
    if (::recv(fd, buf, sizeof buf, 0) <= 0) break;
  }
  ::close(fd);
  return 0;
}
