// Tests of core/trace: valid JSON (checked by nn's strict parser, nn/json.h), events nested per
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
#include "nn/json.h"

using namespace engine;

namespace {

Json parse_trace() {
  Json doc = Json::parse(trace::to_json());
  EXPECT_TRUE(doc.is_object());
  EXPECT_EQ(doc.at("displayTimeUnit").as_string(), "ms");
  EXPECT_TRUE(doc.at("traceEvents").is_array());
  return doc;
}

std::vector<const Json*> events_named(const Json& doc, const std::string& name) {
  std::vector<const Json*> out;
  for (const Json& e : doc.at("traceEvents").items())
    if (e.at("name").as_string() == name) out.push_back(&e);
  return out;
}

// Complete events on each (pid, tid) must nest: any two are disjoint or one contains the other.
void expect_nested(const Json& doc) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const Json& e : doc.at("traceEvents").items()) {
    if (e.at("ph").as_string() != "X") continue;
    const double ts = e.at("ts").as_double(), dur = e.at("dur").as_double();
    EXPECT_GE(dur, 0);
    spans[{int(e.at("pid").as_double()), int(e.at("tid").as_double())}].push_back({ts, ts + dur});
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
  EXPECT_EQ(step[0]->at("ph").as_string(), "X");
  EXPECT_EQ(step[0]->at("pid").as_double(), 3);
  EXPECT_EQ(step[0]->at("cat").as_string(), "train");
  EXPECT_EQ(step[0]->at("args").at("index").as_double(), 7);
  auto fwd = events_named(doc, "forward");
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_GE(fwd[0]->at("dur").as_double(), 150);  // slept 200 us
  EXPECT_GE(fwd[0]->at("ts").as_double(), step[0]->at("ts").as_double());
  auto conv = events_named(doc, "backward conv1");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]->at("args").at("bytes").as_double(), 1024);
  EXPECT_EQ(conv[0]->at("args").at("ratio").as_double(), 0.5);
  EXPECT_EQ(conv[0]->at("args").at("note").as_string(), "a \"quoted\"\n\\ name\t\x01");
  // The process is named after the rank.
  bool named = false;
  for (auto* e : events_named(doc, "process_name"))
    named |= e->at("args").at("name").as_string() == "rank 3";
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
    tid_of[e->at("args").at("name").as_string()] = e->at("tid").as_double();
  ASSERT_TRUE(tid_of.count("comm") && tid_of.count("loader") && tid_of.count("main"));
  EXPECT_NE(tid_of["comm"], tid_of["loader"]);
  std::map<int, int> buckets_per_tid;
  for (auto* e : events_named(doc, "bucket")) ++buckets_per_tid[int(e->at("tid").as_double())];
  EXPECT_EQ(buckets_per_tid[tid_of["comm"]], 50);
  EXPECT_EQ(buckets_per_tid[tid_of["loader"]], 30);
  auto mainw = events_named(doc, "main work");
  ASSERT_EQ(mainw.size(), 1u);
  EXPECT_EQ(mainw[0]->at("tid").as_double(), tid_of["main"]);
  auto inst = events_named(doc, "epoch end");
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0]->at("ph").as_string(), "i");
}

TEST_F(TraceTest, WriteAndMergeFiles) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("trace_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
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
  std::ifstream f(m);
  std::stringstream ss;
  ss << f.rdbuf();
  Json doc = Json::parse(ss.str());
  int pids = 0;
  for (const Json& e : doc.at("traceEvents").items()) {
    if (e.at("name").as_string() == "on rank 0") pids |= 1 << int(e.at("pid").as_double());
    if (e.at("name").as_string() == "on rank 1") pids |= 1 << int(e.at("pid").as_double());
  }
  EXPECT_EQ(pids, 3);
  EXPECT_THROW(trace::write((dir / "no" / "such" / "dir.json").string()), Error);
  std::filesystem::remove_all(dir);
}

TEST_F(TraceTest, EventCapDropsAndCounts) {
  trace::enable(0, 10);
  for (int i = 0; i < 25; ++i) trace::Scope s("e", "test");
  Json doc = parse_trace();
  EXPECT_EQ(events_named(doc, "e").size(), 10u);
  auto stats = events_named(doc, "trace_stats");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0]->at("args").at("dropped_events").as_double(), 15);
}
