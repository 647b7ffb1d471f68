// core/trace.cpp: see trace.h. Each thread records into its own buffer (its own, uncontended
// mutex); the registry of buffers outlives the threads, so events of finished threads are written.
#include "core/trace.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/error.h"

namespace engine::trace {
namespace {

struct Event {
  std::string name, category, args;
  int64_t ts_ns = 0, dur_ns = 0;
  char ph = 'X';
};

struct ThreadBuf {
  std::mutex mu;
  int tid = 0;
  std::string name;
  bool named = false;
  std::vector<Event> events;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuf>> threads;
  int pid = 0;
  size_t max_events = 0;
  std::atomic<size_t> recorded{0}, dropped{0};
};

// Never destroyed: threads may still record while static objects are torn down.
Registry& reg() {
  static Registry* r = new Registry;
  return *r;
}

thread_local std::shared_ptr<ThreadBuf> t_buf;

ThreadBuf& my_buf() {
  if (!t_buf) {
    Registry& r = reg();
    std::lock_guard lk(r.mu);
    t_buf = std::make_shared<ThreadBuf>();
    t_buf->tid = static_cast<int>(r.threads.size()) + 1;
    t_buf->name = "thread " + std::to_string(t_buf->tid);
    r.threads.push_back(t_buf);
  }
  return *t_buf;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void push(Event e) {
  Registry& r = reg();
  if (r.recorded.fetch_add(1, std::memory_order_relaxed) >= r.max_events) {
    r.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadBuf& b = my_buf();
  std::lock_guard lk(b.mu);
  b.events.push_back(std::move(e));
}

// Nanoseconds as microseconds with three decimals: exact, so nested events stay nested.
void append_us(std::string& out, int64_t ns) {
  char buf[32];
  const int64_t a = ns < 0 ? -ns : ns;
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ns < 0 ? "-" : "",
                static_cast<long long>(a / 1000), static_cast<long long>(a % 1000));
  out += buf;
}

void append_key(std::string& args, std::string_view key) {
  if (!args.empty()) args += ',';
  append_json_string(args, key);
  args += ':';
}

void append_metadata(std::string& out, const char* what, int pid, int tid, const char* key,
                     const std::string& value_json) {
  out += "{\"name\":\"";
  out += what;
  out += "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
         ",\"args\":{\"" + key + "\":" + value_json + "}},\n";
}

const char kEventsEnd[] = "\n],\n\"displayTimeUnit\":\"ms\"";

}  // namespace

void enable(int pid, size_t max_events) {
  Registry& r = reg();
  {
    std::lock_guard lk(r.mu);
    r.pid = pid;
    r.max_events = max_events;
  }
  ThreadBuf& b = my_buf();
  {
    std::lock_guard lk(b.mu);
    if (!b.named) {
      b.name = "main";
      b.named = true;
    }
  }
  detail::g_enabled.store(true, std::memory_order_release);
}

void disable() {
  detail::g_enabled.store(false, std::memory_order_release);
}

void clear() {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  for (auto& t : r.threads) {
    std::lock_guard tl(t->mu);
    t->events.clear();
  }
  r.recorded = 0;
  r.dropped = 0;
}

void set_thread_name(std::string_view name) {
  ThreadBuf& b = my_buf();
  std::lock_guard lk(b.mu);
  b.name = std::string(name);
  b.named = true;
}

double now_us() {
  return static_cast<double>(now_ns()) / 1000.0;
}

void record_complete(std::string_view name, std::string_view category, double start_us,
                     double dur_us, std::string args_json) {
  if (!enabled()) return;
  push({std::string(name), std::string(category), std::move(args_json),
        std::llround(start_us * 1000.0), std::llround(std::max(0.0, dur_us) * 1000.0), 'X'});
}

void instant(std::string_view name, std::string_view category) {
  if (!enabled()) return;
  push({std::string(name), std::string(category), {}, now_ns(), 0, 'i'});
}

void Scope::begin(std::string_view name, std::string_view category) {
  active_ = true;
  name_ = name;
  category_ = category;
  start_ns_ = now_ns();
}

void Scope::end() {
  const int64_t stop = now_ns();
  push(
      {std::move(name_), std::move(category_), std::move(args_), start_ns_, stop - start_ns_, 'X'});
}

void Scope::add_int(std::string_view key, int64_t v) {
  append_key(args_, key);
  args_ += std::to_string(v);
}

void Scope::add_double(std::string_view key, double v) {
  append_key(args_, key);
  if (!std::isfinite(v)) {  // JSON has no NaN or infinity
    append_json_string(args_, std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  args_ += buf;
}

void Scope::add_string(std::string_view key, std::string_view v) {
  append_key(args_, key);
  append_json_string(args_, v);
}

std::string to_json() {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  const int pid = r.pid;
  std::string out = "{\"traceEvents\":[\n";
  std::string pname;
  append_json_string(pname, "rank " + std::to_string(pid));
  append_metadata(out, "process_name", pid, 0, "name", pname);
  append_metadata(out, "process_sort_index", pid, 0, "sort_index", std::to_string(pid));
  for (auto& t : r.threads) {
    std::lock_guard tl(t->mu);
    std::string tname;
    append_json_string(tname, t->name);
    append_metadata(out, "thread_name", pid, t->tid, "name", tname);
    append_metadata(out, "thread_sort_index", pid, t->tid, "sort_index", std::to_string(t->tid));
    for (const Event& e : t->events) {
      out += "{\"name\":";
      append_json_string(out, e.name);
      out += ",\"cat\":";
      append_json_string(out, e.category);
      out += ",\"ph\":\"";
      out += e.ph;
      out +=
          "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(t->tid) + ",\"ts\":";
      append_us(out, e.ts_ns);
      if (e.ph == 'X') {
        out += ",\"dur\":";
        append_us(out, e.dur_ns);
      } else {
        out += ",\"s\":\"t\"";  // an instant event's scope: its thread
      }
      if (!e.args.empty()) out += ",\"args\":{" + e.args + "}";
      out += "},\n";
    }
  }
  // The last line is one more metadata event, so that no event line needs a trailing comma test.
  append_metadata(out, "trace_stats", pid, 0, "dropped_events",
                  std::to_string(r.dropped.load(std::memory_order_relaxed)));
  out.resize(out.size() - 2);  // drop ",\n"
  out += kEventsEnd;
  out += "}\n";
  return out;
}

namespace {

void write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ENGINE_CHECK(f, "trace: cannot create '", tmp, "'");
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      ENGINE_FAIL("trace: cannot write '", tmp, "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    ENGINE_FAIL("trace: cannot rename '", tmp, "' to '", path, "'");
  }
}

}  // namespace

void write(const std::string& path) {
  write_text(path, to_json());
}

void merge_files(const std::vector<std::string>& inputs, const std::string& path) {
  const std::string begin = "{\"traceEvents\":[\n";
  std::string out = begin;
  bool first = true;
  for (const std::string& in : inputs) {
    std::ifstream f(in, std::ios::binary);
    ENGINE_CHECK(f, "trace: cannot read '", in, "'");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    const size_t end = text.rfind(kEventsEnd);
    ENGINE_CHECK(text.rfind(begin, 0) == 0 && end != std::string::npos && end >= begin.size(),
                 "trace: '", in, "' is not a trace written by trace::write");
    if (end == begin.size()) continue;  // no events
    if (!first) out += ",\n";
    out.append(text, begin.size(), end - begin.size());
    first = false;
  }
  out += kEventsEnd;
  out += "}\n";
  write_text(path, out);
}

}  // namespace engine::trace
