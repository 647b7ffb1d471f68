// fuzz/fuzz_frame.cpp: the transport's receive path (comm/transport/transport.h, comm/base/frame.h)
// on any bytes from a peer: rank 0 of a world of 2 waits for one frame of an all_reduce from rank
// 1, whose socket delivers the input and then closes. Every input must end in the frame received,
// or an engine::Error (bad magic, a mismatched call, an Abort frame, the peer gone), never a crash
// or a wait past its deadline.
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <vector>

#include "comm/base/frame.h"
#include "comm/transport/tcp_transport.h"
#include "comm/transport/transport.h"
#include "io/error.h"

using namespace engine;
using namespace engine::comm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool once = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)once;
  if (size == 0 || size > 65536) return 0;  // fits a socket buffer: the write below never blocks
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  size_t off = 1;
  while (off < size) {
    ssize_t n = ::write(fds[1], data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::shutdown(fds[1], SHUT_WR);
  {
    Transport t(0, 2, "tcp");
    t.set_channel(1, Lane::Collective, std::make_unique<SocketChannel>(Socket(fds[0])));
    Fingerprint fp;
    fp.seq = 1;
    fp.op = CollOp::AllReduce;
    fp.count = 16;
    std::vector<float> dst(16, 1.0f);
    const FrameHeader expect = FrameHeader::data(fp, 0, dst.size() * sizeof(float));
    try {
      RequestPtr r = (data[0] & 1) ? t.irecv_reduce(1, Lane::Collective, expect, dst.data(),
                                                    DType::F32, ReduceOp::Sum)
                                   : t.irecv(1, Lane::Collective, expect, dst.data());
      t.wait(r, Deadline::after(Millis(200)));
    } catch (const Error&) {
    }
  }
  ::close(fds[1]);
  return 0;
}
