// tests/comm/comm_test_util.cpp: see comm_test_util.h.
#include "tests/comm/comm_test_util.h"

#include "comm/transport/socket.h"

namespace engine::comm::testing {

int free_port() {
  Socket s = listen_tcp("127.0.0.1", 0, "free port probe");
  return s.local_port();
}

}  // namespace engine::comm::testing
