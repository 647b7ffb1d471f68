// comm/health/flight_report.cpp: see flight_report.h. The reader first (strict: the dump format is
// a contract, docs/flight_recorder.md), then the analysis per communicator, then the verdict.
#include "comm/health/flight_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "io/atomic_file.h"
#include "io/error.h"
#include "io/json.h"

namespace engine::comm {
namespace {

constexpr const char* kFormat = "engine-flight-record";
constexpr int64_t kVersion = 1;
constexpr int64_t kMaxSeq = (int64_t{1} << 48) - 1;  // frames carry 48 bits of it
constexpr int64_t kMaxRank = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxWorld = int64_t{1}
                              << 20;  // the report lists ranks: bound what a file makes it
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// ---- the reader ----

// Where a field sits, for messages: "<source>: " or "<source>: entries[3]: ".
struct At {
  const std::string& source;
  int64_t entry = -1;
  std::string str() const {
    return entry < 0 ? source + ": " : source + ": entries[" + std::to_string(entry) + "]: ";
  }
};

const char* kind_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_float:
      return "a fractional number";
    default:
      return "an integer";
  }
}

// A value as short JSON text for a message (a foreign file may hold anything).
std::string shown(const Json& v) {
  std::string s = dump_json(v);
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

const Json& field(const Json& obj, const char* key, const At& at, const char* want) {
  const auto it = obj.find(key);
  ENGINE_CHECK(it != obj.end(), at.str(), "missing \"", key, "\" (", want, ")");
  return *it;
}

[[noreturn]] void mistyped(const Json& v, const char* key, const At& at, const char* want) {
  ENGINE_FAIL(at.str(), "\"", key, "\" must be ", want, ", got ", kind_of(v));
}

int64_t get_int(const Json& obj, const char* key, const At& at, int64_t lo, int64_t hi) {
  const Json& v = field(obj, key, at, "an integer");
  if (!v.is_number_integer()) mistyped(v, key, at, "an integer");
  bool ok;
  if (v.is_number_unsigned())
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
         (lo <= 0 || v.get<uint64_t>() >= static_cast<uint64_t>(lo));
  else
    ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  ENGINE_CHECK(ok, at.str(), "\"", key, "\" is ", shown(v), ", outside ", lo, "..", hi);
  return v.get<int64_t>();
}

double get_number(const Json& obj, const char* key, const At& at) {
  const Json& v = field(obj, key, at, "a number");
  if (!v.is_number()) mistyped(v, key, at, "a number");
  return v.get<double>();
}

const std::string& get_string(const Json& obj, const char* key, const At& at) {
  const Json& v = field(obj, key, at, "a string");
  if (!v.is_string()) mistyped(v, key, at, "a string");
  return v.get_ref<const std::string&>();
}

// The reverse lookups of the names our errors print, so that a name reads back to the same value.
CollOp op_from_name(const std::string& s, const At& at) {
  for (int i = 1; i <= static_cast<int>(CollOp::ChunkTree); ++i)
    if (s == coll_op_name(static_cast<CollOp>(i))) return static_cast<CollOp>(i);
  ENGINE_FAIL(at.str(), "\"op\" is \"", s, "\", not a collective (all_reduce, broadcast, ...)");
}

DType dtype_from_dump(const std::string& s, const At& at) {
  // Every DType: dtype_from_name parses only what files may hold, collectives carry all of them.
  for (DType t :
       {DType::F32, DType::U8, DType::I64, DType::I32, DType::BF16, DType::F16, DType::F64})
    if (s == dtype_name(t)) return t;
  ENGINE_FAIL(at.str(), "\"dtype\" is \"", s, "\", not a dtype (F32, F64, BF16, ...)");
}

ReduceOp redop_from_name(const std::string& s, const At& at) {
  for (int i = 0; i <= static_cast<int>(ReduceOp::Prod); ++i)
    if (s == reduce_op_name(static_cast<ReduceOp>(i))) return static_cast<ReduceOp>(i);
  ENGINE_FAIL(at.str(), "\"redop\" is \"", s, "\", not a reduce op (SUM, AVG, MAX, MIN, PROD)");
}

FlightDumpState state_from_name(const std::string& s, const At& at) {
  if (s == "started") return FlightDumpState::Started;
  if (s == "completed") return FlightDumpState::Completed;
  if (s == "failed") return FlightDumpState::Failed;
  ENGINE_FAIL(at.str(), "\"state\" is \"", s, "\", not started, completed or failed");
}

void parse_outcome(const Json& e, const At& at, int world, FlightDumpEntry* x) {
  x->state = state_from_name(get_string(e, "state", at), at);
  const Json& done = field(e, "completed_s", at, "a number or null");
  if (!done.is_null() && !done.is_number()) mistyped(done, "completed_s", at, "a number or null");
  const bool completed = x->state == FlightDumpState::Completed;
  ENGINE_CHECK(done.is_null() != completed, at.str(), "\"completed_s\" is ", shown(done), " for a ",
               completed ? "completed" : "not completed", " collective");
  if (completed) {
    x->completed_s = done.get<double>();
    ENGINE_CHECK(*x->completed_s >= x->started_s, at.str(), "\"completed_s\" ", *x->completed_s,
                 " is before \"started_s\" ", x->started_s);
  }
  if (x->state != FlightDumpState::Failed) return;
  x->error = get_string(e, "error", at);
  const Json& w = field(e, "waiting_for", at, "an array of ranks");
  if (!w.is_array()) mistyped(w, "waiting_for", at, "an array of ranks");
  for (const Json& r : w) {
    ENGINE_CHECK(r.is_number_integer() && r.get<int64_t>() >= 0 && r.get<int64_t>() < world,
                 at.str(), "\"waiting_for\" holds ", shown(r), ", not a rank below ", world);
    x->waiting_for.push_back(r.get<int>());
  }
}

FlightDumpEntry parse_entry(const Json& e, const At& at, int world) {
  ENGINE_CHECK(e.is_object(), at.str(), "not an object, got ", kind_of(e));
  FlightDumpEntry x;
  x.comm = get_int(e, "comm", at, 0, kMaxInt);
  x.call.group = static_cast<uint16_t>(get_int(e, "group", at, 0, 65535));
  x.call.seq = static_cast<uint64_t>(get_int(e, "seq", at, 0, kMaxSeq));
  x.call.op = op_from_name(get_string(e, "op", at), at);
  x.call.dtype = dtype_from_dump(get_string(e, "dtype", at), at);
  x.call.redop = redop_from_name(get_string(e, "redop", at), at);
  x.call.root = static_cast<int32_t>(get_int(e, "root", at, -1, kMaxRank));
  x.call.count = static_cast<uint64_t>(get_int(e, "count", at, 0, kMaxInt));
  x.started_s = get_number(e, "started_s", at);
  parse_outcome(e, at, world, &x);
  return x;
}

void check_format(const Json& doc, const std::string& source) {
  ENGINE_CHECK(doc.is_object(), source, ": not a flight-recorder dump (", kind_of(doc),
               ", not an object)");
  const auto f = doc.find("format");
  ENGINE_CHECK(f != doc.end(), source, ": not a flight-recorder dump (no \"format\")");
  ENGINE_CHECK(f->is_string() && *f == kFormat, source,
               ": not a flight-recorder dump (\"format\" is ", shown(*f), ", expected \"", kFormat,
               "\")");
  const int64_t version = get_int(doc, "version", At{source}, 0, kMaxInt);
  ENGINE_CHECK(version == kVersion, source, ": \"version\" is ", version, ": this reader knows ",
               "version ", kVersion, " only");
}

}  // namespace

FlightDump parse_flight_dump(std::string_view text, const std::string& source) {
  const Json doc = parse_json(text, source);
  check_format(doc, source);
  const At at{source};
  FlightDump d;
  d.source = source;
  d.world = static_cast<int>(get_int(doc, "world", at, 1, kMaxWorld));
  d.rank = static_cast<int>(get_int(doc, "rank", at, 0, d.world - 1));
  d.pid = get_int(doc, "pid", at, 0, kMaxInt);
  d.host = get_string(doc, "host", at);
  d.reason = get_string(doc, "reason", at);
  d.written_unix_s = get_number(doc, "written_unix_s", at);
  d.zero_unix_s = get_number(doc, "zero_unix_s", at);
  d.recorded = get_int(doc, "recorded", at, 0, kMaxInt);
  const Json& entries = field(doc, "entries", at, "an array");
  if (!entries.is_array()) mistyped(entries, "entries", at, "an array");
  ENGINE_CHECK(static_cast<int64_t>(entries.size()) <= d.recorded, source, ": ", entries.size(),
               " entries but \"recorded\" is ", d.recorded);
  d.entries.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i)
    d.entries.push_back(parse_entry(entries[i], At{source, static_cast<int64_t>(i)}, d.world));
  return d;
}

namespace {

// N of "rank<N>.json" (no sign, no leading zero, at most 9 digits); -1 for any other name.
int rank_of_file_name(const std::string& name) {
  const std::string pre = "rank", post = ".json";
  if (name.size() <= pre.size() + post.size() || name.rfind(pre, 0) != 0 ||
      name.compare(name.size() - post.size(), post.size(), post) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - post.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return -1;
  for (char c : digits)
    if (c < '0' || c > '9') return -1;
  return std::stoi(digits);
}

}  // namespace

std::vector<FlightDump> read_flight_dumps(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_dir = fs::is_directory(dir, ec);
  ENGINE_CHECK(is_dir, dir, ": ", fs::exists(dir, ec) ? "not a folder" : "no such folder",
               " (the flight recorder's DIR, which holds rank<N>.json)");
  std::map<int, std::string> files;  // by rank: the dumps come back in rank order
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const int rank = rank_of_file_name(it->path().filename().string());
    if (rank >= 0) files[rank] = it->path().string();  // temporary files of a write are not
  }
  ENGINE_CHECK(!ec, dir, ": cannot list the folder: ", ec.message());
  ENGINE_CHECK(!files.empty(), dir, ": no flight-recorder dumps (rank<N>.json) in it");
  std::vector<FlightDump> dumps;
  for (const auto& [rank, path] : files) {
    dumps.push_back(parse_flight_dump(read_file(path), path));
    ENGINE_CHECK(dumps.back().rank == rank, path, ": \"rank\" is ", dumps.back().rank,
                 ", but the file is named for rank ", rank);
  }
  return dumps;
}

namespace {

// ---- the analysis ----

// One communicator as the dumps show it: each member's entries by seq, and every seq's entries.
struct RankView {
  const FlightDump* dump = nullptr;
  std::map<uint64_t, const FlightDumpEntry*> by_seq;
};
struct CommView {
  std::map<int, RankView> ranks;  // the members, by rank
  std::map<uint64_t, std::vector<std::pair<int, const FlightDumpEntry*>>> by_seq;  // rank order
};

std::map<FlightCommKey, CommView> comm_views(const std::vector<FlightDump>& dumps) {
  std::map<FlightCommKey, CommView> views;
  for (const FlightDump& d : dumps) {
    views[FlightCommKey{}].ranks[d.rank].dump = &d;  // every rank of the job belongs to its own
    for (const FlightDumpEntry& e : d.entries) {
      RankView& r = views[FlightCommKey{e.comm, e.call.group}].ranks[d.rank];
      r.dump = &d;
      r.by_seq[e.call.seq] = &e;  // a repeated seq: the later entry wins
    }
  }
  for (auto& [key, v] : views)
    for (const auto& [rank, r] : v.ranks)
      for (const auto& [seq, e] : r.by_seq) v.by_seq[seq].push_back({rank, e});
  return views;
}

// How long the rank had been in e when it stopped waiting: at its next collective's start (a
// failed one it left), else at its dump.
double waited_s(const FlightDump& d, const FlightDumpEntry& e) {
  double end = d.written_unix_s - d.zero_unix_s;
  if (e.state == FlightDumpState::Failed)
    for (const FlightDumpEntry& x : d.entries)
      if (x.started_s > e.started_s) end = std::min(end, x.started_s);
  return std::max(0.0, end - e.started_s);
}

std::optional<FlightMismatch> find_mismatch(const CommView& v) {
  std::optional<FlightMismatch> m;
  for (const auto& [seq, calls] : v.by_seq) {
    std::vector<FlightMismatch::Call> distinct;
    for (const auto& rank_entry : calls) {  // not a structured binding: clang 14 cannot capture one
      const Fingerprint& call = rank_entry.second->call;
      auto same =
          std::find_if(distinct.begin(), distinct.end(),
                       [&](const FlightMismatch::Call& c) { return c.call.same_call(call); });
      if (same == distinct.end())
        distinct.push_back({call, {rank_entry.first}});
      else
        same->ranks.push_back(rank_entry.first);
    }
    if (distinct.size() < 2) continue;
    if (m)
      ++m->later;
    else
      m = FlightMismatch{seq, std::move(distinct), 0};
  }
  return m;
}

// A member without an entry of the stalled seq: where it was instead.
FlightStall::Absent absent(int rank, const RankView& r) {
  FlightStall::Absent a;
  a.rank = rank;
  for (auto it = r.by_seq.rbegin(); it != r.by_seq.rend() && !a.last_completed; ++it) {
    if (it->second->state == FlightDumpState::Completed)
      a.last_completed = it->second->call;
    else if (!a.in_flight)
      a.in_flight = it->second->call;
  }
  return a;
}

std::optional<FlightStall> find_stall(const CommView& v, bool live, const FlightReportOptions& o) {
  auto it = std::find_if(v.by_seq.rbegin(), v.by_seq.rend(), [](const auto& s) {
    return std::any_of(s.second.begin(), s.second.end(),
                       [](const auto& c) { return c.second->state != FlightDumpState::Completed; });
  });
  if (it == v.by_seq.rend()) return std::nullopt;
  const uint64_t seq = it->first;
  FlightStall s;
  for (const auto& c : it->second)  // named as a rank that is in it calls it
    if (c.second->state != FlightDumpState::Completed) s.call = c.second->call;
  double longest = 0;
  std::set<int> named;
  for (const auto& [rank, r] : v.ranks) {
    const auto e = r.by_seq.find(seq);
    if (e == r.by_seq.end()) {
      if (r.by_seq.empty() || r.by_seq.rbegin()->first < seq)
        s.never_entered.push_back(absent(rank, r));
      continue;
    }
    if (e->second->state == FlightDumpState::Completed) {
      s.completed.push_back(rank);
      continue;
    }
    const FlightDumpEntry& x = *e->second;
    const bool failed = x.state == FlightDumpState::Failed;
    s.waiting.push_back({rank, waited_s(*r.dump, x), failed, x.error});
    longest = std::max(longest, s.waiting.back().waited_s);
    s.failed = s.failed || failed;
    named.insert(x.waiting_for.begin(), x.waiting_for.end());
  }
  s.named.assign(named.begin(), named.end());
  if (live && !s.failed && longest < o.live_wait_s) return std::nullopt;  // caught mid-step
  return s;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

// Whether arriving last in `count` of `window` collectives is more than an even run of m ranks
// gives: a majority, and 3 standard deviations above a fair draw (two ranks: 65 of 100).
bool beyond_chance(int64_t count, int64_t window, size_t m) {
  const double p = 1.0 / static_cast<double>(m), n = static_cast<double>(window);
  return 2 * count >= window && count >= n * p + 3 * std::sqrt(n * p * (1 - p));
}

FlightSlowest find_slowest(const CommView& v, int64_t last) {
  FlightSlowest s;
  const size_t m = v.ranks.size();
  if (m < 2) return s;
  std::map<int, int64_t> counts;
  std::map<int, double> late_s;
  for (auto it = v.by_seq.rbegin(); it != v.by_seq.rend() && s.window < last; ++it) {
    const auto& calls = it->second;
    if (calls.size() != m || std::any_of(calls.begin(), calls.end(), [](const auto& c) {
          return c.second->state != FlightDumpState::Completed;
        }))
      continue;
    if (s.window++ == 0) s.last_seq = it->first;
    s.first_seq = it->first;
    std::vector<std::pair<double, int>> inside;  // (time inside, rank)
    for (const auto& [rank, e] : calls) inside.push_back({*e->completed_s - e->started_s, rank});
    std::sort(inside.begin(), inside.end());
    if (inside[0].first == inside[1].first) continue;  // a tie: nobody clearly last
    std::vector<double> others;
    for (size_t i = 1; i < inside.size(); ++i) others.push_back(inside[i].first);
    ++counts[inside[0].second];
    late_s[inside[0].second] += median(others) - inside[0].first;
  }
  for (const auto& [rank, n] : counts) {
    s.counts.push_back({rank, n});
    if (n > s.last) s.rank = rank, s.last = n;
  }
  if (s.rank < 0) return s;
  s.share = static_cast<double>(s.last) / static_cast<double>(s.window);
  s.mean_late_ms = late_s[s.rank] / static_cast<double>(s.last) * 1e3;
  s.beyond_chance = beyond_chance(s.last, s.window, m);
  return s;
}

// ---- the text ----

std::string fixed(double x, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, x);
  return b;
}

std::string duration(double s) {
  if (s < 1) return fixed(s * 1e3, s < 0.01 ? 2 : 0) + " ms";
  return fixed(s, 1) + " s";
}

// "#12" or "group 7 #12": how Fingerprint::str() begins.
std::string seq_name(const Fingerprint& f) {
  return (f.group ? "group " + std::to_string(f.group) + " " : std::string()) + "#" +
         std::to_string(f.seq);
}

// "all_reduce(count=4, F32, SUM)": the name without its seq.
std::string call_name(const Fingerprint& f) {
  return f.str().substr(seq_name(f).size() + 1);
}

// A regrouped generation's seqs start again: say which communicator (split groups say it in the
// name already).
std::string comm_label(const FlightCommKey& k) {
  return k.comm ? "comm " + std::to_string(k.comm) + ": " : "";
}

std::string mismatch_line(const FlightMismatch& m) {
  std::string s = "ranks call different collectives at " + seq_name(m.calls[0].call) + ": ";
  for (size_t i = 0; i < m.calls.size(); ++i)
    s += (i ? ", " : "") + flight_rank_list(m.calls[i].ranks) + " " + call_name(m.calls[i].call);
  return s;
}

std::string where_instead(const FlightStall::Absent& a) {
  if (a.in_flight) return "it was still in " + a.in_flight->str();
  if (a.last_completed) return "its last completed collective is " + a.last_completed->str();
  return "it recorded no collective of this communicator";
}

std::vector<int> waiter_ranks(const FlightStall& s, bool accusers_only) {
  std::vector<int> r;
  for (const FlightStall::Waiter& w : s.waiting)
    if (!accusers_only || w.failed) r.push_back(w.rank);
  return r;
}

double longest_wait(const FlightStall& s) {
  double longest = 0;
  for (const FlightStall::Waiter& w : s.waiting) longest = std::max(longest, w.waited_s);
  return longest;
}

// ", which ranks 0, 2 waited in for up to 30.0 s" ("" when nobody waited in it).
std::string waited_clause(const FlightStall& s) {
  if (s.waiting.empty()) return "";
  return ", which " + flight_rank_list(waiter_ranks(s, false)) + " waited in for up to " +
         duration(longest_wait(s));
}

std::string never_entered_line(const FlightStall& s) {
  std::vector<int> absent;
  for (const FlightStall::Absent& a : s.never_entered) absent.push_back(a.rank);
  std::string line = flight_rank_list(absent) + " never entered " + s.call.str() + waited_clause(s);
  if (s.never_entered.size() == 1) line += "; " + where_instead(s.never_entered[0]);
  return line;
}

void stall_evidence(const FlightStall& s, const std::string& label, std::vector<std::string>* out) {
  out->push_back(label + "stopped in " + s.call.str() + (s.failed ? " (failed)" : " (in flight)"));
  for (const FlightStall::Waiter& w : s.waiting)
    out->push_back("  rank " + std::to_string(w.rank) + " waited in it " + duration(w.waited_s) +
                   (w.failed ? " and failed: " + w.error : ", still in it at its dump"));
  for (const FlightStall::Absent& a : s.never_entered)
    out->push_back("  rank " + std::to_string(a.rank) + " never entered it; " + where_instead(a));
  if (!s.completed.empty()) out->push_back("  " + flight_rank_list(s.completed) + " completed it");
  if (!s.named.empty()) out->push_back("  the errors name " + flight_rank_list(s.named));
}

void slowest_evidence(const FlightCommReport& c, const std::string& label,
                      std::vector<std::string>* out) {
  const FlightSlowest& s = c.slowest;
  if (c.members.size() < 2) return;
  if (s.window == 0) {
    out->push_back(label + "no collective that " + flight_rank_list(c.members) +
                   " all completed, to compare their arrivals");
    return;
  }
  std::string line = label + "over the last " + std::to_string(s.window) +
                     " collectives every member completed (#" + std::to_string(s.first_seq) +
                     "..#" + std::to_string(s.last_seq) + "): ";
  if (s.rank < 0) {
    out->push_back(line + "no rank arrived clearly last in any");
    return;
  }
  line += "rank " + std::to_string(s.rank) + " arrived last in " + std::to_string(s.last) + " (" +
          fixed(s.share * 100, 0) + "%), " + fixed(s.mean_late_ms, 2) +
          " ms after the others on average";
  for (const auto& [rank, n] : s.counts)
    if (rank != s.rank) line += "; rank " + std::to_string(rank) + " in " + std::to_string(n);
  out->push_back(line);
}

void comm_evidence(const FlightCommReport& c, std::vector<std::string>* out) {
  const std::string label = comm_label(c.key);
  if (c.mismatch)
    out->push_back(label + mismatch_line(*c.mismatch) +
                   (c.mismatch->later ? " (and " + std::to_string(c.mismatch->later) +
                                            " later collectives differ too)"
                                      : ""));
  if (c.stall)
    stall_evidence(*c.stall, label, out);
  else
    out->push_back(label + "no collective stopped: " + flight_rank_list(c.members) +
                   " completed or were inside every recorded one");
  slowest_evidence(c, label, out);
}

void dump_evidence(const FlightAnalysis& a, const std::vector<FlightDump>& dumps,
                   std::vector<std::string>* out) {
  out->push_back("world " + std::to_string(a.world) + ": dumps from " + flight_rank_list(a.dumped) +
                 (a.missing.empty() ? "" : "; no dump from " + flight_rank_list(a.missing)));
  std::set<int> worlds;
  for (const FlightDump& d : dumps) worlds.insert(d.world);
  if (worlds.size() > 1)
    out->push_back("the dumps name " + std::to_string(worlds.size()) +
                   " world sizes: the job changed size between them");
  for (const FlightDump& d : dumps) {
    // The reason of a dump written at a failure is that failure's error: said once, below.
    const auto failure = std::find_if(d.entries.rbegin(), d.entries.rend(), [&](const auto& e) {
      return e.state == FlightDumpState::Failed && e.error == d.reason;
    });
    out->push_back("rank " + std::to_string(d.rank) + " (pid " + std::to_string(d.pid) + " on " +
                   d.host + "): " + std::to_string(d.recorded) + " collectives, dump written " +
                   (failure != d.entries.rend() ? "when " + failure->call.str() + " failed"
                                                : "for: " + d.reason));
  }
}

// ---- the verdict ----

// The ranks a mismatch blames: all but the largest group of ranks that agree.
std::vector<int> odd_ones(const FlightMismatch& m) {
  size_t most = 0;
  for (size_t i = 1; i < m.calls.size(); ++i)
    if (m.calls[i].ranks.size() > m.calls[most].ranks.size()) most = i;
  std::vector<int> r;
  for (size_t i = 0; i < m.calls.size(); ++i)
    if (i != most) r.insert(r.end(), m.calls[i].ranks.begin(), m.calls[i].ranks.end());
  std::sort(r.begin(), r.end());
  return r;
}

bool stalled_cause(const FlightAnalysis& a, const FlightCommReport& c, FlightVerdict* v) {
  const FlightStall& s = *c.stall;
  const std::string label = comm_label(c.key);
  if (!s.never_entered.empty()) {
    v->cause = FlightCause::NeverEntered;
    for (const FlightStall::Absent& x : s.never_entered) v->ranks.push_back(x.rank);
    v->headline = label + never_entered_line(s);
    return true;
  }
  std::vector<int> nodump;
  std::set_intersection(s.named.begin(), s.named.end(), a.missing.begin(), a.missing.end(),
                        std::back_inserter(nodump));
  if (!s.named.empty()) {
    v->cause = FlightCause::Named;
    v->ranks = s.named;
    v->headline = label + flight_rank_list(waiter_ranks(s, true)) + " failed in " + s.call.str() +
                  " waiting for " + flight_rank_list(s.named) +
                  (nodump.empty() ? "" : " (no dump from " + flight_rank_list(nodump) + ")");
    return true;
  }
  if (c.key == FlightCommKey{} && !a.missing.empty()) {
    v->cause = FlightCause::NoDump;
    v->ranks = a.missing;
    v->headline = label + flight_rank_list(a.missing) + " wrote no dump while " +
                  flight_rank_list(waiter_ranks(s, false)) + " waited in " + s.call.str() +
                  " for up to " + duration(longest_wait(s));
    return true;
  }
  return false;
}

FlightVerdict pick_verdict(const FlightAnalysis& a, const FlightReportOptions& o) {
  FlightVerdict v;
  for (const FlightCommReport& c : a.comms)
    if (c.mismatch) {
      v.cause = FlightCause::Mismatch;
      v.ranks = odd_ones(*c.mismatch);
      v.headline = comm_label(c.key) + mismatch_line(*c.mismatch);
      return v;
    }
  for (const FlightCommReport& c : a.comms)
    if (c.stall && stalled_cause(a, c, &v)) return v;
  for (const FlightCommReport& c : a.comms) {
    const FlightSlowest& s = c.slowest;
    if (!s.beyond_chance) continue;
    v.cause = FlightCause::Straggler;
    v.ranks = {s.rank};
    v.headline = comm_label(c.key) + "rank " + std::to_string(s.rank) +
                 " is the straggler: " + "it arrived last in " + std::to_string(s.last) +
                 " of the last " + std::to_string(s.window) + " collectives (" +
                 fixed(s.share * 100, 0) + "%, #" + std::to_string(s.first_seq) + "..#" +
                 std::to_string(s.last_seq) + "), " + fixed(s.mean_late_ms, 2) +
                 " ms after the others on average";
    return v;
  }
  v.headline = "no cause found: the ranks agree on every collective, none stopped the others, " +
               std::string("and none arrived last in most of the last ") + std::to_string(o.last) +
               " collectives";
  return v;
}

}  // namespace

FlightAnalysis analyze_flight(const std::vector<FlightDump>& dumps,
                              const FlightReportOptions& options) {
  FlightAnalysis a;
  std::set<int> dumped;
  bool live = !dumps.empty();
  for (const FlightDump& d : dumps) {
    a.world = std::max(a.world, d.world);
    dumped.insert(d.rank);
    live = live && d.reason == "SIGUSR1";
  }
  a.dumped.assign(dumped.begin(), dumped.end());
  for (int r = 0; r < a.world; ++r)
    if (!dumped.count(r)) a.missing.push_back(r);
  for (const auto& [key, view] : comm_views(dumps)) {
    FlightCommReport c;
    c.key = key;
    for (const auto& [rank, r] : view.ranks) c.members.push_back(rank);
    c.mismatch = find_mismatch(view);
    c.stall = find_stall(view, live, options);
    c.slowest = find_slowest(view, options.last);
    a.comms.push_back(std::move(c));
  }
  a.verdict = pick_verdict(a, options);
  dump_evidence(a, dumps, &a.verdict.evidence);
  for (const FlightCommReport& c : a.comms) comm_evidence(c, &a.verdict.evidence);
  return a;
}

std::string flight_rank_list(const std::vector<int>& ranks) {
  std::vector<int> r = ranks;
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  std::string out = r.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (i > 0) out += ", ";
    out += std::to_string(r[i]);
    if (j >= i + 2) {
      out += "-" + std::to_string(r[j]);
    } else if (j == i + 1) {
      out += ", " + std::to_string(r[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace engine::comm
