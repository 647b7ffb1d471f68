// comm/health/flight_recorder.cpp: see flight_recorder.h.
#include "comm/health/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "comm/base/reduce.h"
#include "comm/health/blame.h"
#include "core/knobs.h"
#include "io/atomic_file.h"
#include "io/json.h"

namespace engine::comm {
namespace {

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* state_name(FlightEntry::State s) {
  return s == FlightEntry::State::Completed ? "completed"
         : s == FlightEntry::State::Failed  ? "failed"
                                            : "started";
}

Json entry_json(const FlightEntry& e) {
  Json j = {{"comm", e.comm},
            {"group", e.call.group},
            {"seq", e.call.seq},
            {"op", coll_op_name(e.call.op)},
            {"dtype", dtype_name(e.call.dtype)},
            {"redop", reduce_op_name(e.call.redop)},
            {"root", e.call.root},
            {"count", e.call.count},
            {"started_s", e.started_s}};
  j["completed_s"] = e.state == FlightEntry::State::Completed ? Json(e.completed_s) : Json(nullptr);
  j["state"] = state_name(e.state);
  if (e.state == FlightEntry::State::Failed) {
    j["error"] = e.error;
    j["waiting_for"] = e.waiting_for;
  }
  return j;
}

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
}

}  // namespace

FlightRecorder& FlightRecorder::get() {
  static FlightRecorder r(knobs::flight_recorder());
  return r;
}

FlightRecorder::FlightRecorder(bool on)
    : on_(on), zero_(std::chrono::steady_clock::now()), zero_unix_s_(unix_now_s()) {
  if (on_) ring_.resize(kCapacity);
}

double FlightRecorder::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - zero_).count();
}

uint32_t FlightRecorder::new_comm() {
  std::lock_guard lk(mu_);
  return comms_++;
}

void FlightRecorder::started(uint32_t comm, const Fingerprint& call) {
  if (!on_) return;
  const double t = now_s();
  std::lock_guard lk(mu_);
  FlightEntry& e = ring_[recorded_ % kCapacity];
  e.comm = comm;
  e.call = call;
  e.started_s = t;
  e.completed_s = -1;
  e.state = FlightEntry::State::Started;
  e.error.clear();
  e.waiting_for.clear();
  open_[comm] = recorded_++;
}

void FlightRecorder::completed(uint32_t comm) {
  if (!on_) return;
  const double t = now_s();
  std::lock_guard lk(mu_);
  const auto it = open_.find(comm);
  if (it == open_.end()) return;
  if (recorded_ - it->second <= kCapacity) {  // not yet overwritten
    FlightEntry& e = ring_[it->second % kCapacity];
    e.completed_s = t;
    e.state = FlightEntry::State::Completed;
  }
  open_.erase(it);
}

void FlightRecorder::failed(uint32_t comm, const std::string& error, int self) {
  if (!on_) return;
  std::vector<int> named = blamed_ranks(error);
  named.erase(std::remove(named.begin(), named.end(), self), named.end());
  std::lock_guard lk(mu_);
  const auto it = open_.find(comm);
  if (it == open_.end()) return;
  if (recorded_ - it->second <= kCapacity) {
    FlightEntry& e = ring_[it->second % kCapacity];
    e.state = FlightEntry::State::Failed;
    e.error = error;
    e.waiting_for = std::move(named);
  }
  open_.erase(it);
}

std::vector<FlightEntry> FlightRecorder::snapshot(uint64_t* recorded) const {
  std::lock_guard lk(mu_);
  if (recorded) *recorded = recorded_;
  std::vector<FlightEntry> out;
  const uint64_t n = std::min<uint64_t>(recorded_, on_ ? kCapacity : 0);
  out.reserve(n);
  for (uint64_t i = recorded_ - n; i < recorded_; ++i) out.push_back(ring_[i % kCapacity]);
  return out;
}

std::string FlightRecorder::to_json(int rank, int world, const std::string& reason) const {
  uint64_t recorded = 0;
  const std::vector<FlightEntry> entries = snapshot(&recorded);
  Json j = {{"format", "engine-flight-record"},
            {"version", 1},
            {"rank", rank},
            {"world", world},
            {"pid", static_cast<int64_t>(::getpid())},
            {"host", host_name()},
            {"reason", reason},
            {"written_unix_s", unix_now_s()},
            {"zero_unix_s", zero_unix_s_},
            {"recorded", recorded}};
  Json list = Json::array();
  for (const FlightEntry& e : entries) list.push_back(entry_json(e));
  j["entries"] = std::move(list);
  return dump_json(j);
}

// --- dumps ----------------------------------------------------------------------------------

namespace {

struct DumpTarget {
  std::mutex mu;
  std::string dir;
  int rank = 0, world = 1;
};

DumpTarget& target() {
  static DumpTarget t;
  return t;
}

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  const int saved = errno;
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// The dump thread: a signal's byte at a time.
void serve_signals() {
  for (unsigned char b = 0;;) {
    const ssize_t n = ::read(g_signal_pipe[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) return;
    const int sig = b;
    write_flight_dump(sig == SIGUSR1   ? "SIGUSR1"
                      : sig == SIGTERM ? "SIGTERM"
                      : sig == SIGINT  ? "SIGINT"
                                       : "SIGHUP");
    if (sig == SIGUSR1) continue;
    std::fflush(stdout);
    ::signal(sig, SIG_DFL);  // then ends as the signal would have
    ::kill(::getpid(), sig);
  }
}

}  // namespace

void set_flight_dump(const std::string& dir, int rank, int world) {
  if (!dir.empty()) std::filesystem::create_directories(dir);
  DumpTarget& t = target();
  std::lock_guard lk(t.mu);
  if (!dir.empty()) t.dir = dir;
  t.rank = rank;
  t.world = world;
}

bool write_flight_dump(const std::string& reason) {
  DumpTarget& t = target();
  std::string path;
  int rank = 0, world = 1;
  {
    std::lock_guard lk(t.mu);
    if (t.dir.empty()) return false;
    path = (std::filesystem::path(t.dir) / ("rank" + std::to_string(t.rank) + ".json")).string();
    rank = t.rank;
    world = t.world;
  }
  try {
    write_file_atomic(path, FlightRecorder::get().to_json(rank, world, reason));
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flight recorder: cannot write %s: %s\n", path.c_str(), e.what());
    return false;
  }
}

void install_flight_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;
    std::thread(serve_signals).detach();
    struct sigaction sa = {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGUSR1, SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  });
}

}  // namespace engine::comm
