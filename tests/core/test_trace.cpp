// Tests of core/trace: valid JSON (read back by io/json.h's strict parser), events nested per
// thread, thread names, args escaping, nothing recorded when off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/trace.h"
#include "io/json.h"
#include "tests/common/test_util.h"

using namespace engine;

namespace {

Json parse_trace() {
  Json doc = parse_json(trace::to_json(), "trace::to_json()");
  EXPECT_TRUE(doc.is_object());
  EXPECT_EQ(doc.at("displayTimeUnit").get<std::string>(), "ms");
  EXPECT_TRUE(doc.at("traceEvents").is_array());
  return doc;
}

std::vector<const Json*> events_named(const Json& doc, const std::string& name) {
  std::vector<const Json*> out;
  for (const Json& e : doc.at("traceEvents"))
    if (e.at("name").get<std::string>() == name) out.push_back(&e);
  return out;
}

// Complete events on each (pid, tid) must nest: any two are disjoint or one contains the other.
void expect_nested(const Json& doc) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const Json& e : doc.at("traceEvents")) {
    if (e.at("ph").get<std::string>() != "X") continue;
    const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
    EXPECT_GE(dur, 0);
    spans[{int(e.at("pid").get<double>()), int(e.at("tid").get<double>())}].push_back(
        {ts, ts + dur});
  }
  for (auto& [track, v] : spans)
    for (auto& a : v)
      for (auto& b : v) {
        const bool disjoint = a.second <= b.first || b.second <= a.first;
        const bool a_in_b = b.first <= a.first && a.second <= b.second;
        const bool b_in_a = a.first <= b.first && b.second <= a.second;
        EXPECT_TRUE(disjoint || a_in_b || b_in_a)
            << "tid " << track.second << ": [" << a.first << "," << a.second << ") overlaps ["
            << b.first << "," << b.second << ")";
      }
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace::disable();
    trace::clear();
  }
  void TearDown() override {
    trace::disable();
    trace::clear();
  }
};

}  // namespace

TEST_F(TraceTest, DisabledRecordsNothing) {
  EXPECT_FALSE(trace::enabled());
  {
    trace::Scope s("never", "test");
    s.arg("x", 1);
  }
  trace::instant("never either");
  trace::record_complete("nor this", "test", trace::now_us(), 1.0);
  trace::enable(0);
  Json doc = parse_trace();
  EXPECT_TRUE(events_named(doc, "never").empty());
  EXPECT_TRUE(events_named(doc, "never either").empty());
  EXPECT_TRUE(events_named(doc, "nor this").empty());
}

TEST_F(TraceTest, ScopesNestAndCarryArgs) {
  trace::enable(3);
  {
    trace::Scope step("step", "train");
    step.arg("index", 7);
    {
      trace::Scope f("forward", "compute");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    {
      trace::Scope b("backward", "compute");
      trace::Scope l("backward conv1", "compute");
      l.arg("bytes", size_t{1024}).arg("ratio", 0.5).arg("note", "a \"quoted\"\n\\ name\t\x01");
    }
  }
  Json doc = parse_trace();
  expect_nested(doc);
  auto step = events_named(doc, "step");
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0]->at("ph").get<std::string>(), "X");
  EXPECT_EQ(step[0]->at("pid").get<double>(), 3);
  EXPECT_EQ(step[0]->at("cat").get<std::string>(), "train");
  EXPECT_EQ(step[0]->at("args").at("index").get<double>(), 7);
  auto fwd = events_named(doc, "forward");
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_GE(fwd[0]->at("dur").get<double>(), 150);  // slept 200 us
  EXPECT_GE(fwd[0]->at("ts").get<double>(), step[0]->at("ts").get<double>());
  auto conv = events_named(doc, "backward conv1");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]->at("args").at("bytes").get<double>(), 1024);
  EXPECT_EQ(conv[0]->at("args").at("ratio").get<double>(), 0.5);
  EXPECT_EQ(conv[0]->at("args").at("note").get<std::string>(), "a \"quoted\"\n\\ name\t\x01");
  // The process is named after the rank.
  bool named = false;
  for (auto* e : events_named(doc, "process_name"))
    named |= e->at("args").at("name").get<std::string>() == "rank 3";
  EXPECT_TRUE(named);
}

TEST_F(TraceTest, ThreadsGetTheirOwnNamedTracks) {
  trace::enable(0);
  trace::set_thread_name("main");
  auto work = [](const char* name, int n) {
    trace::set_thread_name(name);
    for (int i = 0; i < n; ++i) {
      trace::Scope outer("bucket", "comm");
      outer.arg("bucket", i);
      trace::Scope inner("send", "comm");
    }
  };
  std::thread a(work, "comm", 50), b(work, "loader", 30);
  {
    trace::Scope m("main work", "train");
    a.join();
    b.join();
  }
  trace::instant("epoch end", "train");
  Json doc = parse_trace();
  expect_nested(doc);
  std::map<std::string, int> tid_of;
  for (auto* e : events_named(doc, "thread_name"))
    tid_of[e->at("args").at("name").get<std::string>()] = e->at("tid").get<double>();
  ASSERT_TRUE(tid_of.count("comm") && tid_of.count("loader") && tid_of.count("main"));
  EXPECT_NE(tid_of["comm"], tid_of["loader"]);
  std::map<int, int> buckets_per_tid;
  for (auto* e : events_named(doc, "bucket")) ++buckets_per_tid[int(e->at("tid").get<double>())];
  EXPECT_EQ(buckets_per_tid[tid_of["comm"]], 50);
  EXPECT_EQ(buckets_per_tid[tid_of["loader"]], 30);
  auto mainw = events_named(doc, "main work");
  ASSERT_EQ(mainw.size(), 1u);
  EXPECT_EQ(mainw[0]->at("tid").get<double>(), tid_of["main"]);
  auto inst = events_named(doc, "epoch end");
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0]->at("ph").get<std::string>(), "i");
}

TEST_F(TraceTest, WriteAndMergeFiles) {
  const engine::testing::TempDir tmp;
  const std::filesystem::path& dir = tmp.path();
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string(),
                    m = (dir / "m.json").string();
  trace::enable(0);
  { trace::Scope s("on rank 0", "test"); }
  trace::write(a);
  trace::clear();
  trace::enable(1);
  { trace::Scope s("on rank 1", "test"); }
  trace::write(b);
  trace::merge_files({a, b}, m);
  Json doc = parse_json(engine::testing::read_text(m), m);
  int pids = 0;
  for (const Json& e : doc.at("traceEvents")) {
    if (e.at("name").get<std::string>() == "on rank 0") pids |= 1 << int(e.at("pid").get<double>());
    if (e.at("name").get<std::string>() == "on rank 1") pids |= 1 << int(e.at("pid").get<double>());
  }
  EXPECT_EQ(pids, 3);
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  EXPECT_THROW(trace::write((dir / "no" / "such" / "dir.json").string()), Error);
  // An input that is no trace: the error names it.
  const std::string bad = (dir / "bad.json").string();
  std::ofstream(bad) << "{\"events\": []}";
  engine::testing::expect_error([&] { trace::merge_files({a, bad}, m); }, {bad});
  std::ofstream(bad) << "{\"traceEvents\": [";
  EXPECT_THROW(trace::merge_files({bad}, m), Error);
}

TEST_F(TraceTest, EventCapDropsAndCounts) {
  trace::enable(0, 10);
  for (int i = 0; i < 25; ++i) trace::Scope s("e", "test");
  Json doc = parse_trace();
  EXPECT_EQ(events_named(doc, "e").size(), 10u);
  auto stats = events_named(doc, "trace_stats");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0]->at("args").at("dropped_events").get<double>(), 15);
}

TEST_F(TraceTest, RecordCompleteCarriesArgsAndNonFiniteNumbersAsText) {
  trace::enable(0);
  trace::record_complete("copy", "cuda", 10.0, 2.5,
                         {{"bytes", int64_t{4096}}, {"nan", std::nan("")}, {"stream", "s1"}});
  {
    trace::Scope s("s", "test");
    s.arg("inf", 1.0 / 0.0).arg("-inf", -1.0 / 0.0).arg("big", int64_t{1} << 60);
  }
  Json doc = parse_trace();
  auto copy = events_named(doc, "copy");
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0]->at("ts").get<double>(), 10.0);
  EXPECT_EQ(copy[0]->at("dur").get<double>(), 2.5);
  EXPECT_EQ(copy[0]->at("args"), Json::parse(R"({"bytes":4096,"nan":"nan","stream":"s1"})"));
  auto s = events_named(doc, "s");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->at("args"),
            Json::parse(R"({"inf":"inf","-inf":"-inf","big":1152921504606846976})"));
}
