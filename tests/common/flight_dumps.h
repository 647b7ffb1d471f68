// tests/common/flight_dumps.h: flight-recorder dumps made by hand (the format of
// docs/flight_recorder.md), for the reader's and flight_report's tests: a builder per rank that
// appends collectives and writes DIR/rank<N>.json.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/json.h"

namespace engine::testing {

// What a recorded collective was called with (421642 F32 elements summed, by default).
struct FlightCall {
  std::string op = "all_reduce", dtype = "F32", redop = "SUM";
  int64_t count = 421642, root = -1, comm = 0, group = 0;
};

class FlightDumpBuilder {
 public:
  // Rank `rank` of `world`, its time zero at zero_unix_s on the wall clock.
  FlightDumpBuilder(int rank, int world, double zero_unix_s = 1.7e9)
      : rank_(rank), world_(world), zero_(zero_unix_s) {}

  FlightDumpBuilder& completed(int64_t seq, double started_s, double completed_s,
                               const FlightCall& c = {}) {
    return add(seq, started_s, completed_s, "completed", c);
  }
  FlightDumpBuilder& started(int64_t seq, double started_s, const FlightCall& c = {}) {
    return add(seq, started_s, std::nullopt, "started", c);
  }
  FlightDumpBuilder& failed(int64_t seq, double started_s, const std::string& error,
                            const std::vector<int>& waiting_for, const FlightCall& c = {}) {
    add(seq, started_s, std::nullopt, "failed", c);
    entries_.back()["error"] = error;
    entries_.back()["waiting_for"] = waiting_for;
    return *this;
  }
  // Why and when (seconds since time zero) the dump was written; by default 0.1 s after the last
  // event, for "SIGTERM".
  FlightDumpBuilder& written(const std::string& reason, std::optional<double> at_s = {}) {
    reason_ = reason;
    at_s_ = at_s;
    return *this;
  }

  Json json() const {
    double at = 0;
    for (const Json& e : entries_)
      at = std::max(at, e["completed_s"].is_null() ? e["started_s"].get<double>()
                                                   : e["completed_s"].get<double>());
    return Json{{"format", "engine-flight-record"},
                {"version", 1},
                {"rank", rank_},
                {"world", world_},
                {"pid", 4000 + rank_},
                {"host", "node" + std::to_string(rank_ / 8)},
                {"reason", reason_},
                {"written_unix_s", zero_ + at_s_.value_or(at + 0.1)},
                {"zero_unix_s", zero_},
                {"recorded", entries_.size()},
                {"entries", entries_}};
  }
  std::string text() const { return dump_json(json(), 1); }
  // Writes dir/rank<N>.json.
  void write(const std::string& dir) const {
    write_file_atomic(dir + "/rank" + std::to_string(rank_) + ".json", text());
  }

 private:
  FlightDumpBuilder& add(int64_t seq, double started_s, std::optional<double> completed_s,
                         const char* state, const FlightCall& c) {
    Json e = {
        {"comm", c.comm},         {"group", c.group},       {"seq", seq},     {"op", c.op},
        {"dtype", c.dtype},       {"redop", c.redop},       {"root", c.root}, {"count", c.count},
        {"started_s", started_s}, {"completed_s", nullptr}, {"state", state}};
    if (completed_s) e["completed_s"] = *completed_s;
    entries_.push_back(std::move(e));
    return *this;
  }

  int rank_, world_;
  double zero_;
  std::string reason_ = "SIGTERM";
  std::optional<double> at_s_;
  Json entries_ = Json::array();
};

}  // namespace engine::testing
