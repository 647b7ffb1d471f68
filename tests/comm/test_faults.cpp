// tests/comm/test_faults.cpp: what goes wrong must fail fast and say who: mismatched collectives,
// timeouts, a rank that dies mid-collective, strangers on a data port, a rendezvous that never
// completes. Short timeouts throughout; each test bounds its own duration.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>

#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "comm/rendezvous/tcp_store.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

using testing::run_threads;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Faults, MismatchedCountsFailOnEveryRankNamingBoth) {
  const int W = 3;
  CommOptions o;
  o.timeout = Millis(5000);
  auto comms = make_mem_communicators(W, o);
  auto t0 = Clock::now();
  auto errs = run_threads(W, [&](int r) {
    std::vector<float> b(20, 1.0f);
    comms[r]->all_reduce(b.data(), 10, DType::F32);  // agreed
    comms[r]->all_reduce(b.data(), r == 2 ? 20 : 10, DType::F32);
  });
  EXPECT_LT(Clock::now() - t0, Millis(3000)) << "must not wait for the timeout";
  for (int r = 0; r < W; ++r) {
    EXPECT_TRUE(has(errs[r], "collective mismatch"))
        << "rank " << r << ": " << errs[r] << "\n0: " << errs[0] << "\n1: " << errs[1]
        << "\n2: " << errs[2];
    EXPECT_TRUE(has(errs[r], "count=20") && has(errs[r], "count=10")) << errs[r];
    EXPECT_TRUE(has(errs[r], "rank 2")) << errs[r];
  }
  // Broken for good.
  float x = 0;
  EXPECT_THROW(comms[0]->all_reduce(&x, 1, DType::F32), Error);
}

TEST(Faults, DifferentCollectivesAndRootsAreCaught) {
  const int W = 3;
  CommOptions o;
  o.timeout = Millis(5000);
  {
    auto comms = make_mem_communicators(W, o);
    auto errs = run_threads(W, [&](int r) {
      float b[4] = {1, 2, 3, 4};
      if (r == 1)
        comms[r]->broadcast(b, 4, DType::F32, 0);
      else
        comms[r]->all_reduce(b, 4, DType::F32);
    });
    for (int r = 0; r < W; ++r) {
      EXPECT_TRUE(has(errs[r], "broadcast") && has(errs[r], "all_reduce")) << r << ": " << errs[r];
    }
  }
  {
    // Roots differ: broadcast's data flow alone would let ranks finish with wrong data.
    auto comms = make_mem_communicators(W, o);
    auto errs = run_threads(W, [&](int r) {
      float b[4] = {1, 2, 3, 4};
      comms[r]->broadcast(b, 4, DType::F32, r == 0 ? 0 : 1);
    });
    for (int r = 0; r < W; ++r)
      EXPECT_TRUE(has(errs[r], "root=0") && has(errs[r], "root=1")) << errs[r];
  }
  {
    // One rank calls one collective more than the others: sequence numbers differ.
    auto comms = make_mem_communicators(2, o);
    auto errs = run_threads(2, [&](int r) {
      float b = 1;
      if (r == 0) comms[r]->barrier();
      comms[r]->all_reduce(&b, 1, DType::F32);
      comms[r]->all_reduce(&b, 1, DType::F32);
    });
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(has(errs[r], "mismatch")) << errs[r];
  }
  {
    // dtype differs
    auto comms = make_mem_communicators(2, o);
    auto errs = run_threads(2, [&](int r) {
      int64_t b[2] = {1, 2};
      comms[r]->all_reduce(b, r == 0 ? 2 : 1, r == 0 ? DType::F32 : DType::I64);
    });
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(has(errs[r], "I64") && has(errs[r], "F32")) << errs[r];
  }
}

TEST(Faults, TimeoutNamesTheRankWaitedFor) {
  CommOptions o;
  o.timeout = Millis(300);
  o.algo = Algo::Ring;  // rank 0 waits for its left neighbour
  auto comms = make_mem_communicators(3, o);
  auto t0 = Clock::now();
  std::string err;
  try {
    float b[3] = {1, 2, 3};
    comms[0]->all_reduce(b, 3, DType::F32);  // ranks 1 and 2 never call
  } catch (const TimeoutError& e) {
    err = e.what();
  }
  auto took = Clock::now() - t0;
  EXPECT_TRUE(has(err, "timed out") && has(err, "rank 2")) << err;  // rank 2 is 0's left
  EXPECT_GE(took, Millis(250));
  EXPECT_LT(took, Millis(2000));
  // The peers hear about it instead of waiting for their own timeout.
  float b = 1;
  try {
    comms[1]->all_reduce(&b, 1, DType::F32);
    ADD_FAILURE() << "rank 1 should fail";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "rank 0")) << e.what();
  }
}

TEST(Faults, P2PTimeoutAndMismatch) {
  CommOptions o;
  o.timeout = Millis(200);
  auto comms = make_mem_communicators(2, o);
  float x = 0;
  try {
    comms[0]->recv(&x, 1, DType::F32, 1);
    ADD_FAILURE();
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(has(e.what(), "rank 1")) << e.what();
  }
  auto c2 = make_mem_communicators(2, o);
  auto errs = run_threads(2, [&](int r) {
    float b[4] = {};
    if (r == 0)
      c2[0]->send(b, 4, DType::F32, 1, /*tag=*/3);
    else
      c2[1]->recv(b, 2, DType::F32, 0, 3);
  });
  EXPECT_TRUE(has(errs[1], "point-to-point mismatch") && has(errs[1], "count=4")) << errs[1];
}

TEST(Faults, RendezvousTimeoutListsMissingRanks) {
  auto store = std::make_shared<MemStore>();
  ConnectOptions o;
  o.timeout = Millis(300);
  auto t0 = Clock::now();
  auto errs = run_threads(2, [&](int r) { connect_communicator(store, r, 4, o); });
  EXPECT_LT(Clock::now() - t0, Millis(3000));
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(has(errs[r], "ranks [2, 3] of 4 never arrived")) << errs[r];
}

TEST(Faults, StrangerOnADataPortIsRefusedAndTheJobGoesOn) {
  auto store = std::make_shared<MemStore>();
  ConnectOptions o;
  o.timeout = Millis(10000);
  o.transport = TransportKind::Tcp;
  std::atomic<int> connected{0};
  ::testing::internal::CaptureStderr();
  auto errs = run_threads(3, [&](int r) {
    if (r == 2) {
      // The stranger: reads rank 0's data port from the store and sends garbage, then connects
      // and says nothing, then lets rank 1 in.
      std::string info = store->get("engine/1/rank/0");
      std::istringstream is(info);
      std::string host_id, addr, port;
      std::getline(is, host_id);
      std::getline(is, addr);
      std::getline(is, port);
      Socket s = connect_tcp(addr, std::stoi(port), Deadline::after(Millis(2000)), "stranger");
      std::string junk(64, 'x');
      send_all(s, junk.data(), junk.size(), Deadline::after(Millis(1000)), "rank 0");
      Socket silent = connect_tcp(addr, std::stoi(port), Deadline::after(Millis(2000)), "s2");
      // Rank 0 closes the junk connection when it refuses it: then rank 1 may come in.
      char byte;
      try {
        recv_all(s, &byte, 1, Deadline::after(Millis(5000)), "rank 0");
        ADD_FAILURE() << "rank 0 answered the junk";
      } catch (const Error&) {
      }
      store->set("go", "1");
      // The silent connection stays open until ranks 0 and 1 are connected.
      const auto deadline = Clock::now() + Millis(10000);
      while (connected.load() < 2 && Clock::now() < deadline)
        std::this_thread::sleep_for(Millis(2));
      return;
    }
    if (r == 1) store->get("go");
    auto c = connect_communicator(store, r, 2, o);
    ++connected;
    float v = static_cast<float>(r + 1);
    c->all_reduce(&v, 1, DType::F32);
    EXPECT_EQ(v, 3.0f);
  });
  std::string log = ::testing::internal::GetCapturedStderr();
  testing::expect_no_errors(errs);
  EXPECT_TRUE(has(log, "rank 0 refused a connection") && has(log, "bad handshake")) << log;
}

TEST(Faults, RendezvousPortInUse) {
  Socket taken = listen_tcp("0.0.0.0", 0, "test");
  InitOptions o;
  o.init_method = "tcp://127.0.0.1:" + std::to_string(taken.local_port());
  o.rank = 0;
  o.world_size = 2;
  o.connect.timeout = Millis(500);
  try {
    init_communicator(o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "already in use") && has(e.what(), "rendezvous")) << e.what();
  }
}

// A forked rank dies in the middle of a ring all_reduce (at its first step): the others fail
// promptly, naming it. Over TCP and over shared memory.
class DeadPeer : public ::testing::TestWithParam<TransportKind> {};

struct ExitAtStep : RingObserver {
  void on_step(const RingStepInfo&) override { _exit(3); }
};

TEST_P(DeadPeer, OthersFailFastNamingIt) {
  const int W = 3, port = testing::free_port();
  const TransportKind kind = GetParam();
  auto codes = testing::run_processes(W, [&](int r) {
    InitOptions o;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = r;
    o.world_size = W;
    o.connect.timeout = Millis(20000);
    o.connect.transport = kind;
    auto c = init_communicator(o);
    c->set_algo(Algo::Ring);  // ExitAtStep watches the ring's steps
    std::vector<float> b(1 << 16, 1.0f);
    c->all_reduce(b.data(), b.size(), DType::F32);
    ExitAtStep die;
    if (r == 2) c->set_ring_observer(&die);
    auto t0 = Clock::now();
    bool failed = false;
    try {
      c->all_reduce(b.data(), b.size(), DType::F32);
    } catch (const Error& e) {
      failed = true;
      // Exit normally (destructors run): code 1 with the message when slow or unnamed.
      if (Clock::now() - t0 > Millis(5000)) throw Error(std::string("slow: ") + e.what());
      if (!has(e.what(), "rank 2")) throw Error(std::string("peer not named: ") + e.what());
    }
    if (!failed) throw Error("no error although rank 2 died");
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], 3);
}

INSTANTIATE_TEST_SUITE_P(Transports, DeadPeer,
                         ::testing::Values(TransportKind::Tcp, TransportKind::Shm),
                         [](const auto& p) { return std::string(transport_kind_name(p.param)); });

}  // namespace
}  // namespace engine::comm
