// tests/comm/test_flight_recorder.cpp: the flight recorder (comm/health/flight_recorder.h): what
// communicators record, the ring of 2,000, a failed collective and whom it names, the dump's
// format (docs/flight_recorder.md) and its size, and a dump written atomically into its folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "comm/communicator.h"
#include "comm/health/flight_recorder.h"
#include "comm/rendezvous/rendezvous.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

Fingerprint call_of(uint64_t seq, uint64_t count) {
  Fingerprint f;
  f.seq = seq;
  f.op = CollOp::AllReduce;
  f.count = count;
  return f;
}

// Two ranks as threads: each all_reduce and broadcast they make is in the process's recorder,
// with its sequence number, fingerprint, times in order and the state completed.
TEST(FlightRecorder, EveryCollectiveOfACommunicatorIsRecorded) {
  if (!FlightRecorder::get().on()) GTEST_SKIP() << "ENGINE_FLIGHT_RECORDER=0";
  auto comms = make_mem_communicators(2);
  testing::expect_no_errors(testing::run_threads(2, [&](int r) {
    std::vector<float> x(4242, 1.0f);
    for (int i = 0; i < 3; ++i) comms[r]->all_reduce(x.data(), x.size(), DType::F32);
    comms[r]->broadcast(x.data(), x.size(), DType::F32, 1);
  }));
  std::vector<FlightEntry> mine;
  for (const FlightEntry& e : FlightRecorder::get().snapshot())
    if (e.call.count == 4242) mine.push_back(e);
  ASSERT_EQ(mine.size(), 8u);  // 4 calls on each of the 2 ranks
  for (const FlightEntry& e : mine) {
    EXPECT_EQ(e.state, FlightEntry::State::Completed);
    EXPECT_GE(e.completed_s, e.started_s);
    EXPECT_GE(e.call.seq, 1u);
    EXPECT_LE(e.call.seq, 4u);
  }
  EXPECT_EQ(std::count_if(mine.begin(), mine.end(),
                          [](const FlightEntry& e) { return e.call.op == CollOp::Broadcast; }),
            2);
}

TEST(FlightRecorder, KeepsTheLast2000AndCountsThemAll) {
  FlightRecorder r(true);
  const uint32_t c = r.new_comm();
  for (uint64_t s = 1; s <= 2500; ++s) {
    r.started(c, call_of(s, 10));
    r.completed(c);
  }
  uint64_t recorded = 0;
  const std::vector<FlightEntry> es = r.snapshot(&recorded);
  EXPECT_EQ(recorded, 2500u);
  ASSERT_EQ(es.size(), FlightRecorder::kCapacity);
  EXPECT_EQ(es.front().call.seq, 501u);  // oldest first
  EXPECT_EQ(es.back().call.seq, 2500u);
  // A dump of 2,000 entries stays under 1 MB.
  EXPECT_LT(r.to_json(0, 4, "SIGUSR1").size(), 1u << 20);
}

// A failed collective keeps its error and the ranks it names (not the failing rank itself); one
// in flight stays started; a nested communicator's entry does not close its parent's.
TEST(FlightRecorder, AFailedCollectiveNamesWhomItWaitedFor) {
  FlightRecorder r(true);
  const uint32_t outer = r.new_comm(), inner = r.new_comm();
  r.started(outer, call_of(7, 100));
  r.started(inner, call_of(1, 100));
  r.completed(inner);
  r.failed(outer,
           "rank 0: timed out after 3 s in #7 all_reduce(count=100, F32, SUM): rank 2 is frozen "
           "(its process is stopped) (found by rank 0)",
           0);
  r.started(outer, call_of(8, 100));
  const std::vector<FlightEntry> es = r.snapshot();
  ASSERT_EQ(es.size(), 3u);
  EXPECT_EQ(es[0].state, FlightEntry::State::Failed);
  EXPECT_EQ(es[0].waiting_for, std::vector<int>{2});
  EXPECT_NE(es[0].error.find("rank 2 is frozen"), std::string::npos);
  EXPECT_EQ(es[1].state, FlightEntry::State::Completed);
  EXPECT_EQ(es[2].state, FlightEntry::State::Started);
}

TEST(FlightRecorder, TheDumpHasTheDocumentedKeys) {
  FlightRecorder r(true);
  const uint32_t c = r.new_comm();
  r.started(c, call_of(1, 5));
  r.completed(c);
  r.started(c, call_of(2, 5));
  r.failed(c, "rank 1 is gone (its process exited)", 0);
  const Json j = parse_json(r.to_json(3, 4, "rank 3: boom"), "dump");
  EXPECT_EQ(j["format"], "engine-flight-record");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["rank"], 3);
  EXPECT_EQ(j["world"], 4);
  EXPECT_EQ(j["reason"], "rank 3: boom");
  EXPECT_EQ(j["recorded"], 2);
  for (const char* k : {"pid", "host", "written_unix_s", "zero_unix_s"}) EXPECT_TRUE(j.contains(k));
  const Json& e0 = j["entries"][0];
  EXPECT_EQ(e0["op"], "all_reduce");
  EXPECT_EQ(e0["dtype"], "F32");
  EXPECT_EQ(e0["redop"], "SUM");
  EXPECT_EQ(e0["seq"], 1);
  EXPECT_EQ(e0["count"], 5);
  EXPECT_EQ(e0["state"], "completed");
  EXPECT_TRUE(e0["completed_s"].is_number());
  const Json& e1 = j["entries"][1];
  EXPECT_EQ(e1["state"], "failed");
  EXPECT_TRUE(e1["completed_s"].is_null());
  EXPECT_EQ(e1["waiting_for"], Json::array({1}));
}

TEST(FlightRecorder, OffRecordsNothing) {
  FlightRecorder r(false);
  const uint32_t c = r.new_comm();
  r.started(c, call_of(1, 5));
  r.completed(c);
  uint64_t recorded = 7;
  EXPECT_TRUE(r.snapshot(&recorded).empty());
  EXPECT_EQ(recorded, 0u);
}

TEST(FlightRecorder, ADumpGoesIntoItsFolderWholeAndNamedByRank) {
  EXPECT_FALSE(write_flight_dump("no folder yet"));
  const auto dir =
      std::filesystem::temp_directory_path() / ("flight-" + std::to_string(::getpid()));
  set_flight_dump((dir / "made").string(), 5, 6);  // created
  ASSERT_TRUE(write_flight_dump("SIGUSR1"));
  const Json j = parse_json(read_file((dir / "made" / "rank5.json").string()), "rank5.json");
  EXPECT_EQ(j["reason"], "SIGUSR1");
  EXPECT_EQ(j["world"], 6);
  set_flight_dump("", 2, 3);  // a regrouped job: the same folder, its new rank
  ASSERT_TRUE(write_flight_dump("again"));
  EXPECT_TRUE(std::filesystem::exists(dir / "made" / "rank2.json"));
  size_t files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir / "made")) ++files;
  EXPECT_EQ(files, 2u);  // no temporary file left
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace engine::comm
