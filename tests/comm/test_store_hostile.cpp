// tests/comm/test_store_hostile.cpp: the TCP store's bounds against hostile clients (tcp_store.h):
// lengths over what a rank could send are refused without allocating them, every read after a
// connection opens has a deadline, connections are capped, finished ones reaped, refusals logged
// only up to a limit, and the store goes on serving its ranks. (tests/apps/test_store_attack.cpp
// attacks a real 2-rank job.)
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/rendezvous/rendezvous.h"
#include "comm/rendezvous/tcp_store.h"
#include "core/error.h"
#include "tests/comm/comm_test_util.h"
#include "tests/common/proc_status.h"

namespace engine::comm {
namespace {

constexpr uint32_t kHello[2] = {0x53474E45, 1};  // "ENGS", version 1
constexpr uint8_t kSet = 1;

// A client that has sent the store's handshake and read its answer.
Socket greeted(int port) {
  Socket s = connect_tcp("127.0.0.1", port, Deadline::after(Millis(5000)), "hostile client");
  send_all(s, kHello, sizeof kHello, Deadline::after(Millis(2000)), "store");
  uint32_t back[2];
  recv_all(s, back, sizeof back, Deadline::after(Millis(2000)), "store");
  return s;
}

template <class T>
void append(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Whether the server hangs up on s within `ms`.
bool hung_up_within(const Socket& s, int ms) {
  const Deadline d = Deadline::after(Millis(ms));
  char buf[256];
  while (!d.expired()) {
    pollfd p{s.fd(), POLLIN, 0};
    if (poll(&p, 1, d.poll_ms(50)) <= 0) continue;
    const ssize_t n = recv(s.fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

void expect_store_serves(int port) {
  TcpStore client("127.0.0.1", port, false, Millis(5000));
  client.set("after", "ok");
  EXPECT_EQ(client.get("after"), "ok");
}

TEST(StoreHostile, HugeClaimedLengthsAreRefusedWithoutAllocating) {
  TcpStoreServer server("127.0.0.1", 0, {Millis(2000), Millis(2000), 1024});
  ::testing::internal::CaptureStderr();
  const long before = engine::testing::proc_status_kb("VmRSS");
  std::vector<Socket> clients;
  for (int i = 0; i < 50; ++i) {
    Socket s = greeted(server.port());
    std::string req;
    append<uint8_t>(req, kSet);
    if (i % 2 == 0) {
      append<uint32_t>(req, 0xFFFFFFF0u);  // a 4 GiB key
    } else {
      append<uint32_t>(req, 3);
      req += "key";
      append<uint32_t>(req, 64u << 20);  // a 64 MiB value (the old bound), of which 1 KiB comes
      req += std::string(1024, 'x');
    }
    send_all(s, req.data(), req.size(), Deadline::after(Millis(2000)), "store");
    clients.push_back(std::move(s));
  }
  for (const Socket& s : clients) EXPECT_TRUE(hung_up_within(s, 1000));
  const long grown_kb = engine::testing::proc_status_kb("VmRSS") - before;
  std::printf("[RSS growth under 50 hostile clients] %ld kB\n", grown_kb);
  EXPECT_LT(grown_kb, 20 * 1024);
  expect_store_serves(server.port());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("a key of 4294967280 bytes (at most 4096)"), std::string::npos) << log;
  EXPECT_NE(log.find("a value of 67108864 bytes (at most 1048576)"), std::string::npos) << log;
  EXPECT_NE(log.find("later refusals are not logged"), std::string::npos) << log;
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 25) << log;
}

TEST(StoreHostile, EveryReadHasADeadline) {
  TcpStoreServer server("127.0.0.1", 0, {Millis(300), Millis(300), 1024});
  ::testing::internal::CaptureStderr();
  // Silent after connecting.
  Socket silent = connect_tcp("127.0.0.1", server.port(), Deadline::after(Millis(2000)), "silent");
  // Half a handshake.
  Socket half = connect_tcp("127.0.0.1", server.port(), Deadline::after(Millis(2000)), "half");
  send_all(half, kHello, 4, Deadline::after(Millis(1000)), "store");
  // A request whose value (within bounds) never comes.
  Socket stalled = greeted(server.port());
  std::string req;
  append<uint8_t>(req, kSet);
  append<uint32_t>(req, 1);
  req += "k";
  append<uint32_t>(req, 1000);
  send_all(stalled, req.data(), req.size(), Deadline::after(Millis(1000)), "store");
  for (const Socket* s : {&silent, &half, &stalled}) EXPECT_TRUE(hung_up_within(*s, 3000));
  // A client that has greeted and stays idle between requests is kept.
  Socket idle = greeted(server.port());
  EXPECT_FALSE(hung_up_within(idle, 800));
  expect_store_serves(server.port());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("no handshake within 0.3 s"), std::string::npos) << log;
  EXPECT_NE(log.find("a request incomplete 0.3 s after its first byte"), std::string::npos) << log;
}

TEST(StoreHostile, ConnectionsAreCappedAndFinishedOnesReaped) {
  TcpStoreServer server("127.0.0.1", 0, {Millis(5000), Millis(5000), 4});
  ::testing::internal::CaptureStderr();
  std::vector<Socket> held;
  for (int i = 0; i < 4; ++i) held.push_back(greeted(server.port()));
  Socket over = connect_tcp("127.0.0.1", server.port(), Deadline::after(Millis(2000)), "over");
  EXPECT_TRUE(hung_up_within(over, 2000));
  held.clear();  // they close; the server's threads end and are reaped
  const Deadline d = Deadline::after(Millis(3000));
  while (server.connections() > 0 && !d.expired()) std::this_thread::sleep_for(Millis(10));
  EXPECT_EQ(server.connections(), 0);
  expect_store_serves(server.port());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("too many connections (4)"), std::string::npos) << log;
}

// Everything stored is bounded (64 MiB): a client that keeps setting new keys is cut off, and
// the store goes on serving what it holds.
TEST(StoreHostile, TheStoreIsBounded) {
  TcpStoreServer server("127.0.0.1", 0);
  ::testing::internal::CaptureStderr();
  int stored = 0;
  {
    TcpStore filler("127.0.0.1", server.port(), false, Millis(5000));
    const std::string mib(1 << 20, 'x');
    try {
      for (; stored < 100; ++stored) filler.set(std::to_string(stored) + "k", mib);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("closed the connection"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(stored, 63);
  TcpStore client("127.0.0.1", server.port(), false, Millis(5000));
  EXPECT_EQ(client.get("62k").size(), 1u << 20);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("the store is full (64 MiB of keys and values)"), std::string::npos) << log;
}

TEST(StoreHostile, ClientRefusesValuesOverTheBounds) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStore client("127.0.0.1", server.port(), false, Millis(5000));
  try {
    client.set("big", std::string((1 << 20) + 1, 'x'));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the store's bounds"), std::string::npos) << e.what();
  }
  client.set("small", "ok");
  EXPECT_EQ(client.get("small"), "ok");
}

}  // namespace
}  // namespace engine::comm

namespace engine::comm {
namespace {

// Whether something listens on host:port (a refused connection is retried until 300 ms).
bool reachable(const std::string& host, int port) {
  try {
    connect_tcp(host, port, Deadline::after(Millis(300)), "probe");
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Rank 0 serves its store on MASTER_ADDR's interface: another loopback address (127.0.0.2) does
// not reach it; with 0.0.0.0 every interface does.
TEST(StoreBind, TheStoreListensOnTheInterfaceOfItsAddress) {
  for (const std::string host : {"127.0.0.1", "0.0.0.0"}) {
    InitOptions o;
    const int port = testing::free_port();
    o.init_method = "tcp://" + host + ":" + std::to_string(port);
    o.rank = 0;
    o.world_size = 2;
    o.connect.timeout = Millis(5000);
    InitTarget t = resolve_init_method(o);
    EXPECT_TRUE(reachable("127.0.0.1", port)) << host;
    EXPECT_EQ(reachable("127.0.0.2", port), host == "0.0.0.0") << host;
  }
}

// Each rank's data port listens on the address it publishes (the interface that reaches rank 0).
TEST(StoreBind, TheDataPortListensOnTheAddressItPublishes) {
  InitOptions o;
  const int port = testing::free_port();
  o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  o.rank = 0;
  o.world_size = 2;
  o.connect.timeout = Millis(1500);
  InitTarget t = resolve_init_method(o);
  // Rank 0 publishes its entry, then waits for a rank 1 that never comes.
  std::thread rank0([&] { EXPECT_THROW(connect_communicator(t.store, 0, 2, o.connect), Error); });
  TcpStore peek("127.0.0.1", port, false, Millis(3000));
  std::istringstream entry(peek.get("engine/1/rank/0"));  // host id, address, port, ...
  std::string host_id, addr, data_port;
  std::getline(entry, host_id);
  std::getline(entry, addr);
  std::getline(entry, data_port);
  EXPECT_EQ(addr, "127.0.0.1");
  EXPECT_FALSE(reachable("127.0.0.2", std::stoi(data_port)));
  rank0.join();
}

}  // namespace
}  // namespace engine::comm
