// core/trace.h: a process-wide Chrome trace-event recorder (the JSON that Perfetto and
// chrome://tracing open): RAII scopes become complete events ("ph":"X") on one track per thread.
// Off by default; a disabled Scope costs one relaxed atomic load and records nothing.
//
//   trace::enable(rank);                  // pid of every event = the rank: one track group per
//   rank trace::set_thread_name("comm");       // on the communication thread (the first is "main")
//   { trace::Scope s("forward", "compute"); ... }          // one event, nested per thread
//   { trace::Scope s("allreduce", "comm"); s.arg("bucket", 3).arg("bytes", n); ... }
//   trace::write("trace.json");           // {"traceEvents":[...],"displayTimeUnit":"ms"}
//
// Times are microseconds of the monotonic clock (steady_clock), which all processes of one host
// share, so the files of several ranks merged with merge_files() line up.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace engine::trace {

namespace detail {
inline std::atomic<bool> g_enabled{false};
}  // namespace detail

// Starts recording; pid names the process track ("rank <pid>"). The calling thread is named
// "main" unless it has a name already. Events beyond max_events are dropped (and counted).
void enable(int pid, size_t max_events = 4'000'000);
// Stops recording; what was recorded stays until clear() or the next write().
void disable();
inline bool enabled() {
  return detail::g_enabled.load(std::memory_order_relaxed);
}
// Forgets every recorded event (thread names stay).
void clear();

// Names the calling thread's track (thread_name metadata); tids are small ints, stable per thread.
void set_thread_name(std::string_view name);

// Microseconds on the trace's clock.
double now_us();

// A value shown with an event (its "args"): an integer, a number (NaN and infinities are written
// as the strings "nan", "inf", "-inf": JSON has no such numbers) or a text.
struct Arg {
  std::string key;
  std::variant<int64_t, double, std::string> value;
};
using Args = std::vector<Arg>;

// One complete event on the calling thread: [start_us, start_us + dur_us).
void record_complete(std::string_view name, std::string_view category, double start_us,
                     double dur_us, Args args = {});
// A point in time on the calling thread ("ph":"i").
void instant(std::string_view name, std::string_view category = "engine");

// The recording as a JSON document (written by nlohmann-json, io/json.h), and the same written to
// path atomically (io/atomic_file.h). write() throws engine::Error naming the path when it cannot
// write.
std::string to_json();
void write(const std::string& path);
// Joins trace files written by write() (e.g. one per rank) into one file with every event.
// Throws engine::Error naming an input that cannot be read or is not such a trace.
void merge_files(const std::vector<std::string>& inputs, const std::string& path);

// Records the time from construction to destruction as one event on the calling thread.
// Names are copied only when recording is on, so dynamic names cost nothing when it is off.
class Scope {
 public:
  explicit Scope(std::string_view name, std::string_view category = "engine") {
    if (enabled()) begin(name, category);
  }
  ~Scope() {
    if (active_) end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Extra values shown with the event (ignored when not recording).
  template <class T>
  requires std::is_integral_v<T> Scope& arg(std::string_view key, T v) {
    if (active_) args_.push_back({std::string(key), static_cast<int64_t>(v)});
    return *this;
  }
  template <class T>
  requires std::is_floating_point_v<T> Scope& arg(std::string_view key, T v) {
    if (active_) args_.push_back({std::string(key), static_cast<double>(v)});
    return *this;
  }
  Scope& arg(std::string_view key, std::string_view v) {
    if (active_) args_.push_back({std::string(key), std::string(v)});
    return *this;
  }
  Scope& arg(std::string_view key, const char* v) { return arg(key, std::string_view(v)); }

 private:
  void begin(std::string_view name, std::string_view category);
  void end();
  bool active_ = false;
  int64_t start_ns_ = 0;
  std::string name_, category_;
  Args args_;
};

}  // namespace engine::trace
