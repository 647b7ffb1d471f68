// tests/comm/test_flight_report.cpp: the flight recorder's dumps read back and explained
// (comm/health/flight_report.h), on dumps made by hand in a temporary folder: a frozen rank, a
// mismatch, a straggler, an even run, a rank the errors name, a rank without a dump, a live
// snapshot, and bad dumps refused with the file and the field named.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/health/flight_report.h"
#include "tests/common/expect_error.h"
#include "tests/common/flight_dumps.h"
#include "tests/common/temp_dir.h"

using namespace engine;
using namespace engine::comm;
using engine::testing::expect_error;
using engine::testing::FlightCall;
using engine::testing::FlightDumpBuilder;

namespace {

// Ranks 0..world-1, each completing #1..#n: #i starts at i * 0.1 s, inside 5 ms.
std::vector<FlightDumpBuilder> healthy(int world, int64_t n) {
  std::vector<FlightDumpBuilder> b;
  for (int r = 0; r < world; ++r) {
    b.emplace_back(r, world);
    for (int64_t i = 1; i <= n; ++i) b.back().completed(i, i * 0.1, i * 0.1 + 0.005);
  }
  return b;
}

class FlightReport : public ::testing::Test {
 protected:
  std::string dir() const { return tmp_.path().string(); }
  FlightAnalysis analyze(const std::vector<FlightDumpBuilder>& ranks,
                         const FlightReportOptions& o = {}) {
    for (const FlightDumpBuilder& b : ranks) b.write(dir());
    return analyze_flight(read_flight_dumps(dir()), o);
  }
  engine::testing::TempDir tmp_;
};

// The straggler runs: in collective i, rank last_of(i) is inside 1 ms, the others 5 and 6 ms.
template <class F>
std::vector<FlightDumpBuilder> arrivals(int world, int64_t n, F last_of) {
  std::vector<FlightDumpBuilder> b;
  for (int r = 0; r < world; ++r) b.emplace_back(r, world);
  for (int64_t i = 1; i <= n; ++i) {
    const int late = last_of(i);
    for (int r = 0, k = 0; r < world; ++r) {
      const double inside = r == late ? 0.001 : 0.005 + 0.001 * (k++ % 2);
      b[r].completed(i, i * 0.1 + 0.006 - inside, i * 0.1 + 0.006);
    }
  }
  return b;
}

}  // namespace

TEST_F(FlightReport, ReadsADumpAndNamesItsCollectivesAsTheErrorsDo) {
  FlightDumpBuilder b(1, 4, 1.7e9);
  b.completed(91, 1.5, 1.75)
      .started(3, 2.0, FlightCall{"broadcast", "BF16", "SUM", 10, 0, 1, 7})
      .written("SIGUSR1", 2.5);
  const FlightDump d = parse_flight_dump(b.text(), "r1.json");
  EXPECT_EQ(d.source, "r1.json");
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.world, 4);
  EXPECT_EQ(d.pid, 4001);
  EXPECT_EQ(d.host, "node0");
  EXPECT_EQ(d.reason, "SIGUSR1");
  EXPECT_DOUBLE_EQ(d.written_unix_s, 1.7e9 + 2.5);
  EXPECT_EQ(d.recorded, 2);
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[0].call.str(), "#91 all_reduce(count=421642, F32, SUM)");
  EXPECT_EQ(d.entries[0].state, FlightDumpState::Completed);
  EXPECT_DOUBLE_EQ(*d.entries[0].completed_s, 1.75);
  EXPECT_EQ(d.entries[1].call.str(), "group 7 #3 broadcast(count=10, BF16, root=0)");
  EXPECT_EQ(d.entries[1].comm, 1);
  EXPECT_EQ(d.entries[1].state, FlightDumpState::Started);
  EXPECT_FALSE(d.entries[1].completed_s);
}

TEST_F(FlightReport, NamesTheFrozenRankAndWhereItStopped) {
  // Rank 1's last completed is #41; ranks 0 and 2 failed in #42 after 30 s, naming rank 1.
  std::vector<FlightDumpBuilder> b = healthy(3, 41);
  const std::string err = "timed out after 30 s in #42 all_reduce: rank 1 is frozen";
  b[0].failed(42, 4.2, err, {1}).written(err, 34.2);
  b[2].failed(42, 4.2, err, {1}).written(err, 34.3);
  b[1].written("SIGTERM", 40);
  const FlightAnalysis a = analyze(b);
  EXPECT_EQ(a.world, 3);
  EXPECT_EQ(a.missing, std::vector<int>{});
  EXPECT_EQ(a.verdict.cause, FlightCause::NeverEntered);
  EXPECT_EQ(a.verdict.ranks, std::vector<int>{1});
  EXPECT_EQ(a.verdict.headline,
            "rank 1 never entered #42 all_reduce(count=421642, F32, SUM), which ranks 0, 2 waited "
            "in for up to 30.1 s; its last completed collective is #41 all_reduce(count=421642, "
            "F32, SUM)");
  ASSERT_EQ(a.comms.size(), 1u);
  ASSERT_TRUE(a.comms[0].stall);
  const FlightStall& s = *a.comms[0].stall;
  EXPECT_EQ(s.call.seq, 42u);
  EXPECT_TRUE(s.failed);
  ASSERT_EQ(s.waiting.size(), 2u);
  EXPECT_EQ(s.waiting[0].rank, 0);
  EXPECT_NEAR(s.waiting[0].waited_s, 30.0, 1e-6);
  EXPECT_EQ(s.waiting[1].rank, 2);
  EXPECT_NEAR(s.waiting[1].waited_s, 30.1, 1e-6);
  EXPECT_EQ(s.waiting[1].error, err);
  ASSERT_EQ(s.never_entered.size(), 1u);
  EXPECT_EQ(s.never_entered[0].last_completed->seq, 41u);
  EXPECT_EQ(s.named, std::vector<int>{1});
  const std::vector<std::string>& ev = a.verdict.evidence;
  EXPECT_NE(std::find(ev.begin(), ev.end(),
                      "  rank 1 never entered it; its last completed "
                      "collective is #41 all_reduce(count=421642, F32, SUM)"),
            ev.end());
  EXPECT_NE(std::find(ev.begin(), ev.end(), "  the errors name rank 1"), ev.end());
}

TEST_F(FlightReport, NamesTheRanksThatCallADifferentCollective) {
  std::vector<FlightDumpBuilder> b = healthy(3, 11);
  b[0].completed(12, 1.2, 1.3);
  b[1].completed(12, 1.2, 1.3);
  b[2].completed(12, 1.2, 1.3, FlightCall{"broadcast", "F32", "SUM", 421642, 0});
  for (FlightDumpBuilder& r : b) r.completed(13, 1.4, 1.5);
  b[1].completed(14, 1.6, 1.7, FlightCall{"all_reduce", "F32", "SUM", 7});
  b[0].completed(14, 1.6, 1.7);
  b[2].completed(14, 1.6, 1.7);
  const FlightAnalysis a = analyze(b);
  EXPECT_EQ(a.verdict.cause, FlightCause::Mismatch);
  EXPECT_EQ(a.verdict.ranks, std::vector<int>{2});
  EXPECT_EQ(a.verdict.headline,
            "ranks call different collectives at #12: ranks 0, 1 all_reduce(count=421642, F32, "
            "SUM), rank 2 broadcast(count=421642, F32, root=0)");
  ASSERT_TRUE(a.comms[0].mismatch);
  EXPECT_EQ(a.comms[0].mismatch->later, 1);  // #14's count
}

TEST_F(FlightReport, NamesTheStragglerWithItsShare) {
  // Rank 2 is inside least (it came last) in 90 of 100; rank 0 in the other 10.
  const auto b = arrivals(3, 100, [](int64_t i) { return i <= 90 ? 2 : 0; });
  const FlightAnalysis a = analyze(b);
  EXPECT_EQ(a.verdict.cause, FlightCause::Straggler);
  EXPECT_EQ(a.verdict.ranks, std::vector<int>{2});
  const FlightSlowest& s = a.comms[0].slowest;
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.window, 100);
  EXPECT_EQ(s.last, 90);
  EXPECT_DOUBLE_EQ(s.share, 0.9);
  EXPECT_NEAR(s.mean_late_ms, 4.5, 1e-6);  // the others' median 5.5 ms less its 1 ms
  EXPECT_EQ(a.verdict.headline,
            "rank 2 is the straggler: it arrived last in 90 of the last 100 collectives (90%, "
            "#1..#100), 4.50 ms after the others on average");

  // --last 10: the window holds #91..#100, where rank 0 came last each time.
  FlightReportOptions o;
  o.last = 10;
  const FlightAnalysis w = analyze_flight(read_flight_dumps(dir()), o);
  EXPECT_EQ(w.verdict.ranks, std::vector<int>{0});
  EXPECT_EQ(w.comms[0].slowest.window, 10);
  EXPECT_EQ(w.comms[0].slowest.first_seq, 91u);
  EXPECT_DOUBLE_EQ(w.comms[0].slowest.share, 1.0);
}

TEST_F(FlightReport, FindsNoCauseInAnEvenRun) {
  const FlightAnalysis a = analyze(arrivals(3, 100, [](int64_t i) { return int(i % 3); }));
  EXPECT_EQ(a.verdict.cause, FlightCause::None);
  EXPECT_TRUE(a.verdict.ranks.empty());
  EXPECT_EQ(a.verdict.headline.rfind("no cause found", 0), 0u) << a.verdict.headline;
  EXPECT_FALSE(a.comms[0].stall);
  EXPECT_FALSE(a.comms[0].slowest.beyond_chance);
  EXPECT_NEAR(a.comms[0].slowest.share, 0.34, 1e-9);
}

TEST_F(FlightReport, AMajorityOfTwoRanksIsAStragglerOnlyBeyondChance) {
  // Two even ranks split the last arrivals about 50:50; 60 of 100 is within a fair draw's 3 sigma
  // (65), 70 is not.
  FlightAnalysis a = analyze(arrivals(2, 100, [](int64_t i) { return i <= 60 ? 1 : 0; }));
  EXPECT_EQ(a.comms[0].slowest.rank, 1);
  EXPECT_EQ(a.verdict.cause, FlightCause::None);
  a = analyze(arrivals(2, 100, [](int64_t i) { return i <= 70 ? 1 : 0; }));
  EXPECT_EQ(a.verdict.cause, FlightCause::Straggler);
  EXPECT_EQ(a.verdict.ranks, std::vector<int>{1});
}

TEST_F(FlightReport, NamesTheRankTheErrorsNameWhenEveryRankEnteredIt) {
  std::vector<FlightDumpBuilder> b = healthy(3, 41);
  b[0].failed(42, 4.2, "rank 1 is frozen", {1}).written("rank 1 is frozen", 34.2);
  b[1].started(42, 4.2).written("SIGTERM", 40);
  b[2].failed(42, 4.2, "rank 1 is frozen", {1}).written("rank 1 is frozen", 34.2);
  const FlightAnalysis a = analyze(b);
  EXPECT_EQ(a.verdict.cause, FlightCause::Named);
  EXPECT_EQ(a.verdict.ranks, std::vector<int>{1});
  EXPECT_EQ(a.verdict.headline,
            "ranks 0, 2 failed in #42 all_reduce(count=421642, F32, SUM) waiting for rank 1");
}

TEST_F(FlightReport, NamesTheRankWithoutADumpThatTheOthersWaitedFor) {
  std::vector<FlightDumpBuilder> b = healthy(3, 41);
  b.pop_back();  // rank 2 was killed before it could write
  b[0].started(42, 4.2).written("SIGTERM", 64.2);
  b[1].started(42, 4.2).written("SIGTERM", 64.2);
  const FlightAnalysis a = analyze(b);
  EXPECT_EQ(a.missing, std::vector<int>{2});
  EXPECT_EQ(a.verdict.cause, FlightCause::NoDump);
  EXPECT_EQ(a.verdict.headline,
            "rank 2 wrote no dump while ranks 0, 1 waited in #42 all_reduce(count=421642, F32, "
            "SUM) for up to 60.0 s");
  EXPECT_EQ(a.verdict.evidence[0], "world 3: dumps from ranks 0, 1; no dump from rank 2");
}

TEST_F(FlightReport, ALiveSnapshotCaughtMidStepIsNoStall) {
  // SIGUSR1 on every rank: rank 0 entered #42 10 ms before its dump, rank 1 has not yet.
  std::vector<FlightDumpBuilder> b = healthy(2, 41);
  b[0].started(42, 4.2).written("SIGUSR1", 4.21);
  b[1].written("SIGUSR1", 4.21);
  EXPECT_EQ(analyze(b).verdict.cause, FlightCause::None);
  b[0].written("SIGUSR1", 9.2);  // 5 s in it: stuck
  b[1].written("SIGUSR1", 9.2);
  const FlightAnalysis a = analyze(b);
  EXPECT_EQ(a.verdict.cause, FlightCause::NeverEntered);
  EXPECT_EQ(a.verdict.ranks, std::vector<int>{1});
}

TEST_F(FlightReport, RefusesBadDumpsNamingTheFileAndTheField) {
  const std::string missing = dir() + "/nope";
  expect_error([&] { read_flight_dumps(missing); }, {missing, "no such folder"});
  expect_error([&] { read_flight_dumps(dir()); }, {dir(), "no flight-recorder dumps"});

  const std::string r1 = dir() + "/rank1.json";
  auto refused = [&](const Json& j, const std::vector<std::string>& parts) {
    write_file_atomic(r1, dump_json(j));
    std::vector<std::string> all = parts;
    all.insert(all.begin(), r1 + ": ");
    expect_error([&] { read_flight_dumps(dir()); }, all);
  };
  const std::vector<FlightDumpBuilder> b = healthy(2, 3);
  b[0].write(dir());
  const std::string text = b[1].text();
  write_file_atomic(r1, text.substr(0, text.size() / 2));
  expect_error([&] { read_flight_dumps(dir()); }, {r1 + ": not valid JSON"});

  Json j = b[1].json();
  j["format"] = "chrome-trace";
  refused(j, {"not a flight-recorder dump", "\"format\" is \"chrome-trace\""});
  refused(Json::array(), {"not a flight-recorder dump"});
  j = b[1].json();
  j["version"] = 2;
  refused(j, {"\"version\" is 2"});
  j = b[1].json();
  j["entries"][1].erase("seq");
  refused(j, {"entries[1]: missing \"seq\" (an integer)"});
  j = b[1].json();
  j.erase("zero_unix_s");
  refused(j, {"missing \"zero_unix_s\" (a number)"});
  j = b[1].json();
  j["world"] = "2";
  refused(j, {"\"world\" must be an integer, got a string"});
  j = b[1].json();
  j["entries"][0]["op"] = "all_reduse";
  refused(j, {"entries[0]: \"op\" is \"all_reduse\""});
  j = b[1].json();
  j["entries"][2]["completed_s"] = nullptr;
  refused(j, {"entries[2]: \"completed_s\" is null for a completed collective"});
  j = b[1].json();
  j["rank"] = 0;
  refused(j, {"\"rank\" is 0, but the file is named for rank 1"});

  // Not dumps: another file in DIR, a write's temporary file.
  write_file_atomic(r1, text);
  write_file_atomic(dir() + "/rank1.json.tmp.77.0", "{");
  write_file_atomic(dir() + "/notes.txt", "x");
  EXPECT_EQ(read_flight_dumps(dir()).size(), 2u);
}

TEST_F(FlightReport, ListsRanksWithRuns) {
  EXPECT_EQ(flight_rank_list({2}), "rank 2");
  EXPECT_EQ(flight_rank_list({2, 0}), "ranks 0, 2");
  EXPECT_EQ(flight_rank_list({0, 1}), "ranks 0, 1");
  EXPECT_EQ(flight_rank_list({7, 0, 1, 2, 3}), "ranks 0-3, 7");
}
