// Tests of core/trace: valid JSON (checked by a small strict parser here: core tests link only
// engine_core), events nested per thread, thread names, args escaping, nothing recorded when off.
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

using namespace engine;

namespace {

// A JSON value, strict RFC 8259 (no trailing commas, no NaN, escapes checked).
struct Json {
  enum Kind { Null, Bool, Num, Str, Arr, Obj } kind = Null;
  double num = 0;
  bool b = false;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
  const Json& at(const std::string& k) const { return obj.at(k); }
  bool has(const std::string& k) const { return obj.count(k) > 0; }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  Json parse() {
    Json v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  char peek() { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool lit(const char* w) {
    const std::string t(w);
    if (s_.compare(i_, t.size(), t) != 0) return false;
    i_ += t.size();
    return true;
  }
  Json value() {
    ws();
    Json v;
    const char c = peek();
    if (c == '{') {
      v.kind = Json::Obj;
      ++i_;
      ws();
      if (peek() == '}') return ++i_, v;
      for (;;) {
        ws();
        std::string k = string();
        ws();
        expect(':');
        v.obj[k] = value();
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = Json::Arr;
      ++i_;
      ws();
      if (peek() == ']') return ++i_, v;
      for (;;) {
        v.arr.push_back(value());
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = Json::Str;
      v.str = string();
      return v;
    }
    if (lit("true")) return v.kind = Json::Bool, v.b = true, v;
    if (lit("false")) return v.kind = Json::Bool, v;
    if (lit("null")) return v;
    return number();
  }
  Json number() {
    const size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (isdigit(peek())) {
      while (isdigit(peek())) ++i_;
    } else {
      fail("bad value");
    }
    if (peek() == '.') {
      ++i_;
      if (!isdigit(peek())) fail("bad fraction");
      while (isdigit(peek())) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!isdigit(peek())) fail("bad exponent");
      while (isdigit(peek())) ++i_;
    }
    Json v;
    v.kind = Json::Num;
    v.num = std::stod(s_.substr(start, i_ - start));
    return v;
  }
  static bool isdigit(char c) { return c >= '0' && c <= '9'; }
  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          const unsigned cp = std::stoul(s_.substr(i_, 4), nullptr, 16);
          i_ += 4;
          if (cp >= 0x80) fail("test parser only decodes ASCII \\u escapes");
          out += static_cast<char>(cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
  const std::string& s_;
  size_t i_ = 0;
};

Json parse_trace() {
  Json doc = Parser(trace::to_json()).parse();
  EXPECT_EQ(doc.kind, Json::Obj);
  EXPECT_EQ(doc.at("displayTimeUnit").str, "ms");
  EXPECT_EQ(doc.at("traceEvents").kind, Json::Arr);
  return doc;
}

std::vector<const Json*> events_named(const Json& doc, const std::string& name) {
  std::vector<const Json*> out;
  for (const Json& e : doc.at("traceEvents").arr)
    if (e.at("name").str == name) out.push_back(&e);
  return out;
}

// Complete events on each (pid, tid) must nest: any two are disjoint or one contains the other.
void expect_nested(const Json& doc) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const Json& e : doc.at("traceEvents").arr) {
    if (e.at("ph").str != "X") continue;
    const double ts = e.at("ts").num, dur = e.at("dur").num;
    EXPECT_GE(dur, 0);
    spans[{int(e.at("pid").num), int(e.at("tid").num)}].push_back({ts, ts + dur});
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
  EXPECT_EQ(step[0]->at("ph").str, "X");
  EXPECT_EQ(step[0]->at("pid").num, 3);
  EXPECT_EQ(step[0]->at("cat").str, "train");
  EXPECT_EQ(step[0]->at("args").at("index").num, 7);
  auto fwd = events_named(doc, "forward");
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_GE(fwd[0]->at("dur").num, 150);  // slept 200 us
  EXPECT_GE(fwd[0]->at("ts").num, step[0]->at("ts").num);
  auto conv = events_named(doc, "backward conv1");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]->at("args").at("bytes").num, 1024);
  EXPECT_EQ(conv[0]->at("args").at("ratio").num, 0.5);
  EXPECT_EQ(conv[0]->at("args").at("note").str, "a \"quoted\"\n\\ name\t\x01");
  // The process is named after the rank.
  bool named = false;
  for (auto* e : events_named(doc, "process_name"))
    named |= e->at("args").at("name").str == "rank 3";
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
    tid_of[e->at("args").at("name").str] = e->at("tid").num;
  ASSERT_TRUE(tid_of.count("comm") && tid_of.count("loader") && tid_of.count("main"));
  EXPECT_NE(tid_of["comm"], tid_of["loader"]);
  std::map<int, int> buckets_per_tid;
  for (auto* e : events_named(doc, "bucket")) ++buckets_per_tid[int(e->at("tid").num)];
  EXPECT_EQ(buckets_per_tid[tid_of["comm"]], 50);
  EXPECT_EQ(buckets_per_tid[tid_of["loader"]], 30);
  auto mainw = events_named(doc, "main work");
  ASSERT_EQ(mainw.size(), 1u);
  EXPECT_EQ(mainw[0]->at("tid").num, tid_of["main"]);
  auto inst = events_named(doc, "epoch end");
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0]->at("ph").str, "i");
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
  Json doc = Parser(ss.str()).parse();
  int pids = 0;
  for (const Json& e : doc.at("traceEvents").arr) {
    if (e.at("name").str == "on rank 0") pids |= 1 << int(e.at("pid").num);
    if (e.at("name").str == "on rank 1") pids |= 1 << int(e.at("pid").num);
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
  EXPECT_EQ(stats[0]->at("args").at("dropped_events").num, 15);
}
