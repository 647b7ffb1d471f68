// tests/comm/test_torch_store.cpp: the client of PyTorch's c10d TCPStore
// (comm/rendezvous/torch_store.h) against torch 1.13's real server (Debian's python3-torch, run by
// /usr/bin/python3; skipped where torch is not importable), against a server of torch >= 2.1's
// protocol in both of torch's backends (tests/comm/fake_torch_store.h), and against servers that
// answer garbage, close or keep silent. Ranks meet through it as they do under torchrun's static
// rendezvous.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "comm/rendezvous/rendezvous.h"
#include "comm/rendezvous/torch_store.h"
#include "core/error.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/fake_torch_store.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

extern char** environ;

using namespace engine;
using namespace engine::comm;
using namespace engine::comm::testing;
using engine::testing::expect_error;
using engine::testing::read_text;
using engine::testing::TempDir;
using Mode = FakeTorchStore::Mode;

namespace {

// torch 1.13's TCPStore server, with torch's own client through PrefixStore("/worker/attempt_3"):
// it waits for "from_engine", answers "from_torch" (the value reversed), adds 10 to "counter",
// then waits for "done" (60 s at most).
const char* kTorchServer = R"(
import os, sys, datetime
import torch.distributed as d
out = sys.argv[1]
s = d.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=60), wait_for_workers=False)
open(out + ".tmp", "w").write(str(s.port))
os.rename(out + ".tmp", out)
p = d.PrefixStore("/worker/attempt_3", s)
v = p.get("from_engine")
p.set("from_torch", v[::-1])
p.add("counter", 10)
p.wait(["done"])
print("torch side done", flush=True)
)";

class RealTorchStore {
 public:
  RealTorchStore() {
    const std::string port_file = dir_.file("port"), log = dir_.file("log");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    const char* argv[] = {"/usr/bin/python3", "-c", kTorchServer, port_file.c_str(), nullptr};
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      why_ = "cannot start /usr/bin/python3";
      pid_ = -1;
      return;
    }
    // Python and torch start in 1-2 s; the server writes its port once it listens.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(port_file)) {
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        why_ = "torch 1.13 (Debian's python3-torch for /usr/bin/python3) is not importable: " +
               read_text(log);
        return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        why_ = "the torch TCPStore server did not start within 60 s: " + read_text(log);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    port_ = std::stoi(read_text(port_file));
  }
  ~RealTorchStore() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool ok() const { return port_ > 0; }
  const std::string& why() const { return why_; }
  int port() const { return port_; }
  // The server's exit code once it ends (within 20 s), or -1.
  int exit_code() {
    for (int i = 0; i < 1000 && pid_ > 0; ++i) {
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  std::string log() const { return read_text(dir_.file("log")); }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string why_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string addr(int port) {
  return "tcp://127.0.0.1:" + std::to_string(port);
}

// The same checks against any server that keeps what it is told.
void expect_store_semantics(TorchStore& s) {
  s.set("a", std::string("x\0y", 3));
  EXPECT_EQ(s.get("a"), std::string("x\0y", 3));
  EXPECT_EQ(s.add("n", 5), 5);
  EXPECT_EQ(s.add("n", -2), 3);
  EXPECT_EQ(s.get("n"), "3");
  EXPECT_TRUE(s.check({"a", "n"}));
  EXPECT_FALSE(s.check({"a", "absent"}));
  s.wait({"a", "n"}, Millis(1000));
  s.set("empty", "");
  EXPECT_EQ(s.get("empty"), "");
}

}  // namespace

TEST(TorchStoreReal, SpeaksTorch113WithTorchsOwnPrefixStoreClient) {
  RealTorchStore py;
  if (!py.ok()) GTEST_SKIP() << py.why();
  TorchStore s("127.0.0.1", py.port(), "/worker/attempt_3", Millis(20000));
  EXPECT_EQ(s.protocol(), TorchProtocol::Legacy);
  s.set("from_engine", "hello");
  EXPECT_EQ(s.get("from_torch"), "olleh");  // torch read our key and wrote its own
  s.wait({"counter"}, Millis(20000));
  EXPECT_EQ(s.add("counter", 1), 11);
  expect_store_semantics(s);
  // A legacy wait cannot be cancelled: the connection is dropped and the next call reconnects.
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(
      [&] {
        s.wait({"absent", "a"}, Millis(200));
      },
      {"'absent'", addr(py.port()), "not set within"});
  EXPECT_LT(seconds_since(t0), 3);
  EXPECT_TRUE(s.check({"a"}));
  s.set("done", "1");
  EXPECT_EQ(py.exit_code(), 0) << py.log();
}

TEST(TorchStoreReal, RanksMeetThroughTorchrunsAgentStore) {
  RealTorchStore py;
  if (!py.ok()) GTEST_SKIP() << py.why();
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(py.port()).c_str(), 1);
  expect_no_errors(run_threads(2, [&](int r) {
    InitOptions o;
    o.rank = r;
    o.world_size = 2;
    o.connect.timeout = Millis(20000);
    InitTarget t = resolve_init_method(o);
    auto* ts = dynamic_cast<TorchStore*>(t.store.get());
    ASSERT_TRUE(ts) << "every rank is a client of the agent's store";
    EXPECT_EQ(ts->wire_key("k"), "//worker/attempt_2/k");
    auto c = connect_communicator(t.store, t.rank, t.world_size, o.connect);
    float v = static_cast<float>(r + 1);
    c->all_reduce(&v, 1, DType::F32);
    EXPECT_EQ(v, 3.0f);
    c->barrier();
  }));
}

TEST(TorchStoreReal, AgentStoreNeedsTheRestartCount) {
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_EQ(torch_agent_store_from_env("127.0.0.1", 1, Millis(100)), nullptr);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  EXPECT_EQ(torch_agent_store_from_env("127.0.0.1", 1, Millis(100)), nullptr);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  unsetenv("TORCHELASTIC_RESTART_COUNT");
  expect_error([] { torch_agent_store_from_env("127.0.0.1", 1, Millis(100)); },
               {"TORCHELASTIC_RESTART_COUNT"});
}

class TorchStoreValidated : public ::testing::TestWithParam<Mode> {};

TEST_P(TorchStoreValidated, DetectsTheProtocolAndKeepsTheStoresSemantics) {
  FakeTorchStore server(GetParam());
  TorchStore s("127.0.0.1", server.port(), "/worker/attempt_0", Millis(10000));
  EXPECT_EQ(s.protocol(), TorchProtocol::Validated);
  expect_store_semantics(s);
  EXPECT_EQ(server.accepted(), 2) << "the probe's connection, then the validated one";
  EXPECT_EQ(server.closed_by_server(), 1) << "the server closed the probe";
  EXPECT_TRUE(server.has("//worker/attempt_0/a"));
  // A wait that times out is cancelled (CANCEL_WAIT): the connection stays.
  expect_error([&] { s.wait({"late"}, Millis(150)); }, {"'late'", addr(server.port())});
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.set("//worker/attempt_0/late", "v");
  });
  s.wait({"late"}, Millis(10000));  // woken by another client's SET
  later.join();
  EXPECT_EQ(s.get("late"), "v");
  EXPECT_EQ(server.accepted(), 2);
}

TEST_P(TorchStoreValidated, RanksMeetThroughIt) {
  FakeTorchStore server(GetParam());
  expect_no_errors(run_threads(3, [&](int r) {
    auto store = std::make_shared<TorchStore>("127.0.0.1", server.port(), "/worker/attempt_1",
                                              Millis(10000));
    ConnectOptions o;
    o.timeout = Millis(10000);
    auto c = connect_communicator(store, r, 3, o);
    float v = static_cast<float>(r + 1);
    c->all_reduce(&v, 1, DType::F32);
    EXPECT_EQ(v, 6.0f);
    c->barrier();
  }));
}

INSTANTIATE_TEST_SUITE_P(Torch21, TorchStoreValidated,
                         ::testing::Values(Mode::Backend, Mode::LibUv), [](const auto& info) {
                           return info.param == Mode::Backend ? std::string("TCPStoreBackend")
                                                              : std::string("LibUvBackend");
                         });

TEST(TorchStoreErrors, GarbageIsOneErrorNamingTheStoreAndTheOperation) {
  FakeTorchStore server(Mode::Garbage);
  expect_error([&] { TorchStore("127.0.0.1", server.port(), "", Millis(5000)); },
               {addr(server.port()), "connect", "GETNUMKEYS", "not a PyTorch TCPStore?"});
}

TEST(TorchStoreErrors, ALyingServerIsCaughtByTheBoundsOfEachAnswer) {
  FakeTorchStore server(Mode::Lying);
  TorchStore s("127.0.0.1", server.port(), "", Millis(5000));
  expect_error([&] { s.check({"a"}); }, {addr(server.port()), "check 'a'", "answered 7"});
  s.set("k", "v");
  expect_error([&] { s.get("k"); },
               {addr(server.port()), "get 'k'", "announced a value of 1099511627776 bytes"});
}

TEST(TorchStoreErrors, AServerThatClosesIsOneErrorNamingTheOperation) {
  FakeTorchStore server(Mode::Closer);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    TorchStore s("127.0.0.1", server.port(), "", Millis(5000));
    s.add("k", 1);
    ADD_FAILURE() << "no error from a server that closes every connection";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(addr(server.port())), std::string::npos) << m;
    EXPECT_TRUE(m.find("add to 'k'") != std::string::npos || m.find("connect") != std::string::npos)
        << m;
    EXPECT_TRUE(m.find("closed") != std::string::npos || m.find("reset") != std::string::npos) << m;
  }
  EXPECT_LT(seconds_since(t0), 4);
}

TEST(TorchStoreErrors, ASilentServerTimesOutNamingTheStore) {
  FakeTorchStore server(Mode::Silent);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    TorchStore s("127.0.0.1", server.port(), "", Millis(600));
    ADD_FAILURE() << "no error from a server that never answers";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(addr(server.port())), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no answer to GETNUMKEYS"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 3);
}

TEST(TorchStoreErrors, NoServerIsATimeoutNamingTheAddress) {
  const int port = free_port();
  expect_error([&] { TorchStore("127.0.0.1", port, "", Millis(300)); },
               {addr(port), "connect", "could not connect"});
}
