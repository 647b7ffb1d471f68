// tests/comm/test_store.cpp: the three stores behave alike - set/get/add/check/wait, and waits that
// time out name the missing keys; the TCP store refuses strangers and reports a port in use.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <filesystem>
#include <thread>

#include "comm/rendezvous/file_store.h"
#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/tcp_store.h"
#include "core/error.h"
#include "tests/comm/comm_test_util.h"
#include "tests/common/temp_dir.h"

namespace engine::comm {
namespace {

void exercise(Store& a, Store& b) {
  a.set("k", std::string("v\0x", 3));
  EXPECT_EQ(b.get("k"), std::string("v\0x", 3));
  EXPECT_EQ(a.add("n", 2), 2);
  EXPECT_EQ(b.add("n", 5), 7);
  EXPECT_EQ(a.get("n"), "7");
  EXPECT_TRUE(b.check({"k", "n"}));
  EXPECT_FALSE(b.check({"k", "absent"}));
  // A waiter is released by a set from the other client.
  std::thread setter([&] {
    std::this_thread::sleep_for(Millis(30));
    a.set("late", "1");
  });
  b.wait({"late", "k"}, Millis(5000));
  setter.join();
  auto t0 = Clock::now();
  try {
    b.wait({"k", "never1", "never2"}, Millis(100));
    ADD_FAILURE() << "wait should time out";
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'never1', 'never2'"), std::string::npos) << m;
    EXPECT_EQ(m.find("'k'"), std::string::npos) << m;
  }
  EXPECT_LT(Clock::now() - t0, Millis(3000));
  b.set_timeout(Millis(50));
  EXPECT_THROW(b.get("never"), TimeoutError);
}

TEST(Store, Mem) {
  MemStore s;
  exercise(s, s);
}

TEST(Store, File) {
  const engine::testing::TempDir dir;
  FileStore a(dir.path().string()), b(dir.path().string());
  exercise(a, b);
}

TEST(Store, Tcp) {
  TcpStore server("127.0.0.1", 0, true, Millis(5000), "127.0.0.1");
  TcpStore client("127.0.0.1", server.port(), false, Millis(5000));
  exercise(server, client);
}

TEST(Store, TcpPortInUseIsAClearError) {
  Socket taken = listen_tcp("0.0.0.0", 0, "test");
  try {
    TcpStore s("127.0.0.1", taken.local_port(), true, Millis(1000));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
  }
}

TEST(Store, TcpRefusesStrangersAndGoesOn) {
  TcpStore server("127.0.0.1", 0, true, Millis(5000), "127.0.0.1");
  ::testing::internal::CaptureStderr();
  {
    Socket s = connect_tcp("127.0.0.1", server.port(), Deadline::after(Millis(2000)), "stranger");
    const char junk[] = "GET / HTTP/1.1\r\n\r\n";
    send_all(s, junk, sizeof junk, Deadline::after(Millis(1000)), "store");
    char c;
    // The server hangs up on it.
    pollfd p{s.fd(), POLLIN, 0};
    poll(&p, 1, 2000);
    ssize_t n = recv(s.fd(), &c, 1, MSG_DONTWAIT);
    EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << errno;
  }
  TcpStore client("127.0.0.1", server.port(), false, Millis(5000));
  client.set("after", "ok");
  EXPECT_EQ(server.get("after"), "ok");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("refused a connection"), std::string::npos) << log;
}

TEST(Store, TcpClientNamesAMissingRankZero) {
  const int port = testing::free_port();
  try {
    TcpStore s("127.0.0.1", port, false, Millis(200));
    ADD_FAILURE() << "expected a timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 never arrived"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace engine::comm
