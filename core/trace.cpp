// core/trace.cpp: see trace.h. Each thread records into its own buffer (its own, uncontended
// mutex); the registry of buffers outlives the threads, so events of finished threads are written.
#include "core/trace.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"

namespace engine::trace {
namespace {

struct Event {
  std::string name, category;
  Args args;
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

// Nanoseconds as microseconds. The double nearest ns / 1000 is what a reader of the exact
// three-decimal text would get, and nlohmann writes the shortest text that reads back to it.
double us(int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

Json arg_value(const Arg& a) {
  if (const auto* d = std::get_if<double>(&a.value)) {
    if (!std::isfinite(*d)) return std::isnan(*d) ? "nan" : (*d > 0 ? "inf" : "-inf");
    return *d;
  }
  if (const auto* i = std::get_if<int64_t>(&a.value)) return *i;
  return std::get<std::string>(a.value);
}

Json event_json(const Event& e, int pid, int tid) {
  Json j = {{"name", e.name}, {"cat", e.category}, {"ph", std::string(1, e.ph)},
            {"pid", pid},     {"tid", tid},        {"ts", us(e.ts_ns)}};
  if (e.ph == 'X')
    j["dur"] = us(e.dur_ns);
  else
    j["s"] = "t";  // an instant event's scope: its thread
  if (!e.args.empty()) {
    Json& args = j["args"] = Json::object();
    for (const Arg& a : e.args) args[a.key] = arg_value(a);
  }
  return j;
}

// A metadata event ("ph":"M"): names and sort order of the process and thread tracks.
Json metadata(const char* what, int pid, int tid, const char* key, Json value) {
  return {
      {"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{key, std::move(value)}}}};
}

std::string trace_text(Json events) {
  return dump_json({{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}) + "\n";
}

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
                     double dur_us, Args args) {
  if (!enabled()) return;
  push({std::string(name), std::string(category), std::move(args), std::llround(start_us * 1000.0),
        std::llround(std::max(0.0, dur_us) * 1000.0), 'X'});
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

std::string to_json() {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  const int pid = r.pid;
  Json events = Json::array();
  events.push_back(metadata("process_name", pid, 0, "name", "rank " + std::to_string(pid)));
  events.push_back(metadata("process_sort_index", pid, 0, "sort_index", pid));
  for (auto& t : r.threads) {
    std::lock_guard tl(t->mu);
    events.push_back(metadata("thread_name", pid, t->tid, "name", t->name));
    events.push_back(metadata("thread_sort_index", pid, t->tid, "sort_index", t->tid));
    for (const Event& e : t->events) events.push_back(event_json(e, pid, t->tid));
  }
  events.push_back(
      metadata("trace_stats", pid, 0, "dropped_events", r.dropped.load(std::memory_order_relaxed)));
  return trace_text(std::move(events));
}

void write(const std::string& path) {
  write_file_atomic(path, to_json());
}

void merge_files(const std::vector<std::string>& inputs, const std::string& path) {
  Json events = Json::array();
  for (const std::string& in : inputs) {
    Json doc = parse_json(read_file(in), "trace '" + in + "'");
    auto it = doc.is_object() ? doc.find("traceEvents") : doc.end();
    ENGINE_CHECK(it != doc.end() && it->is_array(), "trace: '", in,
                 "' is not a trace written by trace::write");
    for (Json& e : *it) events.push_back(std::move(e));
  }
  write_file_atomic(path, trace_text(std::move(events)));
}

}  // namespace engine::trace
