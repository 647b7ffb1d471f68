// tests/comm/test_blame.cpp: when a rank stops, every other rank's message names it and says why
// (comm/health/blame.h), whichever neighbour each survivor happened to wait on: each rank of 3 and
// 4 frozen in turn with SIGSTOP, over TCP and shared memory; a killed rank; a rank that stops
// calling collectives; and three hosts in network namespaces, each cut off in turn by nftables drop
// rules (no FIN, no RST). Timeouts of 2.5 s keep each case to a few seconds.
#include <gtest/gtest.h>

#include <functional>

#include "comm/health/blame.h"
#include "tests/comm/blame_job.h"
#include "tests/comm/comm_test_util.h"
#include "tests/comm/netns_hosts.h"

namespace engine::comm {
namespace {

using testing::BlameJob;
using testing::JobOptions;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Every rank but `culprit` failed with a message that blames `culprit` as `how` ("is frozen") and
// blames no other rank.
void expect_blamed(const BlameJob& job, int world, int culprit, const std::string& how) {
  for (int r = 0; r < world; ++r) {
    if (r == culprit) continue;
    const std::string msg = job.error(r);
    EXPECT_TRUE(has(msg, "rank " + std::to_string(culprit) + " " + how))
        << "rank " << r << " said: " << msg;
    EXPECT_FALSE(has(msg, "waiting for rank")) << "rank " << r << " said: " << msg;
    for (int j = 0; j < world; ++j) {
      if (j == culprit) continue;
      EXPECT_FALSE(has(msg, "rank " + std::to_string(j) + " is "))
          << "rank " << r << " blamed rank " << j << ": " << msg;
    }
  }
}

// The longest a survivor may take to report: the timeout, a health check, and slack for 2 cores.
constexpr Millis kReport{12000};

// Starts the job, does `fault` to rank `victim` once every rank is in its loop of collectives, and
// checks that every survivor blames `victim` as `how`. Prints what each survivor said.
void expect_fault_blamed(const JobOptions& o, int victim,
                         const std::function<bool(BlameJob&)>& fault, const std::string& how) {
  BlameJob job(o);
  ASSERT_TRUE(job.wait_ready(Millis(15000))) << "the job did not start";
  ASSERT_TRUE(fault(job)) << "could not stop rank " << victim;
  const auto t0 = Clock::now();
  ASSERT_TRUE(job.wait_errors(victim, kReport)) << "survivors did not report in time";
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  expect_blamed(job, o.world, victim, how);
  for (int r = 0; r < o.world; ++r)
    if (r != victim) printf("after %.2f s rank %d said: %s\n", s, r, job.error(r).c_str());
}

JobOptions local_job(TransportKind kind, int world) {
  JobOptions o;
  o.world = world;
  o.transport = kind;
  o.port = testing::free_port();
  return o;
}

struct FreezeCase {
  TransportKind transport;
  int world, victim;
};

class Freeze : public ::testing::TestWithParam<FreezeCase> {};

TEST_P(Freeze, EverySurvivorNamesTheStoppedRank) {
  const auto [kind, W, victim] = GetParam();
  expect_fault_blamed(
      local_job(kind, W), victim,
      [v = victim](BlameJob& job) { return kill(job.pid(v), SIGSTOP) == 0; }, "is frozen");
}

std::vector<FreezeCase> freeze_cases() {
  std::vector<FreezeCase> out;
  for (TransportKind k : {TransportKind::Tcp, TransportKind::Shm})
    for (int w : {3, 4})
      for (int v = 0; v < w; ++v) out.push_back({k, w, v});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Freeze, ::testing::ValuesIn(freeze_cases()), [](const auto& p) {
  return std::string(transport_kind_name(p.param.transport)) + "_W" +
         std::to_string(p.param.world) + "_stop" + std::to_string(p.param.victim);
});

class Stopped : public ::testing::TestWithParam<TransportKind> {};

TEST_P(Stopped, AKilledRankIsGone) {
  expect_fault_blamed(
      local_job(GetParam(), 3), 1, [](BlameJob& job) { return kill(job.pid(1), SIGKILL) == 0; },
      "is gone");
}

TEST_P(Stopped, ARankThatStopsCallingCollectivesIsAliveButNotProgressing) {
  expect_fault_blamed(
      local_job(GetParam(), 3), 2,
      [](BlameJob& job) {
        job.hang(2);
        return true;
      },
      "is alive but not progressing");
}

INSTANTIATE_TEST_SUITE_P(Transports, Stopped,
                         ::testing::Values(TransportKind::Tcp, TransportKind::Shm),
                         [](const auto& p) { return std::string(transport_kind_name(p.param)); });

// Three hosts in network namespaces over TCP; host `victim` is cut off silently. Every survivor
// names it unreachable.
class CutOff : public ::testing::TestWithParam<int> {};

TEST_P(CutOff, EverySurvivorNamesTheCutOffRankUnreachable) {
  const int W = 3, victim = GetParam();
  testing::NetnsHosts net(W);
  if (!net.ok()) GTEST_SKIP() << "no network namespaces: " << net.why_not();
  JobOptions o;
  o.world = W;
  o.transport = TransportKind::Tcp;
  o.store_host = net.addr(0);
  o.port = 29500;  // inside fresh namespaces every port is free
  o.setup = [&](int r) {
    ENGINE_CHECK(net.enter(r), "cannot enter network namespace ", net.host(r));
    setenv("ENGINE_COMM_HOST_ID", ("host" + std::to_string(r)).c_str(), 1);
  };
  expect_fault_blamed(
      o, victim, [&](BlameJob&) { return net.cut(victim); }, "is unreachable");
}

INSTANTIATE_TEST_SUITE_P(Hosts, CutOff, ::testing::Values(0, 1, 2),
                         [](const auto& p) { return "cut" + std::to_string(p.param); });

// The health endpoint itself: counters answered, a closed port is refused, a listener that never
// accepts is silent, and a stranger's nonce gets no answer.
TEST(HealthEndpoint, ClassifiesAnswersRefusalsAndSilence) {
  auto progress = std::make_shared<Progress>();
  progress->started = 7;
  progress->completed = 6;
  HealthServer server(1, "127.0.0.1", progress);
  server.set_nonce(42);
  Socket deaf = listen_tcp("127.0.0.1", 0, "test");  // the kernel accepts, nobody answers
  int closed_port = 0;
  {
    Socket s = listen_tcp("127.0.0.1", 0, "test");
    closed_port = s.local_port();
  }
  std::vector<HealthAddress> peers(4);
  peers[1] = self_health_address("127.0.0.1", server.port());
  peers[2].host = peers[3].host = "127.0.0.1";
  peers[2].port = deaf.local_port();
  peers[3].port = closed_port;
  auto p = probe_all(peers, 0, 42, Deadline::after(Millis(500)));
  EXPECT_EQ(p[1].result, ProbeResult::Answered) << p[1].detail;
  EXPECT_EQ(p[1].reply.rank, 1);
  EXPECT_EQ(p[1].reply.started, 7u);
  EXPECT_EQ(p[1].reply.completed, 6u);
  EXPECT_EQ(p[2].result, ProbeResult::Silent) << p[2].detail;
  EXPECT_EQ(p[3].result, ProbeResult::Refused) << p[3].detail;
  EXPECT_EQ(local_process_state(peers[1]), ProcState::Running);
  auto stranger = probe_all(peers, 0, 43, Deadline::after(Millis(300)));
  EXPECT_NE(stranger[1].result, ProbeResult::Answered);
  tell_all(peers, {1}, 2, 42, "rank 3 is frozen (test)", Deadline::after(Millis(500)));
  EXPECT_EQ(server.verdict(), std::make_pair(std::string("rank 3 is frozen (test)"), 2));
}

}  // namespace
}  // namespace engine::comm
