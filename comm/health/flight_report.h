// comm/health/flight_report.h: reading the flight recorder's dumps (DIR/rank<N>.json, the format
// of docs/flight_recorder.md) and explaining a failed or slow job from all of them, per
// communicator: ranks that call different collectives, the collective the job stopped in and who
// never entered it, and who arrived last most often. `flight_report` (apps/) prints the verdict.
//
//   std::vector<FlightDump> dumps = read_flight_dumps("out/flight");  // throws engine::Error
//   FlightAnalysis a = analyze_flight(dumps);
//   a.verdict.headline;  // "rank 1 never entered #42 all_reduce(count=421642, F32, SUM), ..."
#pragma once
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/base/frame.h"

namespace engine::comm {

enum class FlightDumpState { Started, Completed, Failed };

// One recorded collective. call holds seq, op, dtype, redop, root, count and group, so that
// call.str() names it as our errors do ("#91 all_reduce(count=421642, F32, SUM)").
struct FlightDumpEntry {
  int64_t comm = 0;
  Fingerprint call;
  double started_s = 0;
  std::optional<double> completed_s;  // set exactly when state is Completed
  FlightDumpState state = FlightDumpState::Started;
  std::string error;             // Failed only
  std::vector<int> waiting_for;  // Failed only: the ranks its error names
};

// One rank's dump. Times of entries are seconds since zero_unix_s.
struct FlightDump {
  std::string source;  // the file it was read from
  int rank = 0, world = 1;
  int64_t pid = 0;
  std::string host, reason;
  double written_unix_s = 0, zero_unix_s = 0;
  int64_t recorded = 0;
  std::vector<FlightDumpEntry> entries;  // oldest first
};

// Parses one dump. Throws engine::Error "<source>: ..." naming the field for a text that is not
// JSON, not a dump (`format`), of another `version`, or with a key missing, mistyped or out of
// range ("<source>: entries[3]: missing \"seq\" (an integer)").
FlightDump parse_flight_dump(std::string_view text, const std::string& source);
// Every DIR/rank<N>.json, by rank; a file's `rank` must be its name's N. Throws engine::Error
// naming DIR when it is not a folder or holds no dump, or naming the file that is bad.
std::vector<FlightDump> read_flight_dumps(const std::string& dir);

// A communicator of the job: the entry's `comm` and its group id.
struct FlightCommKey {
  int64_t comm = 0;
  uint16_t group = 0;
  auto operator<=>(const FlightCommKey&) const = default;
};

// The same seq called differently on two or more ranks: each distinct call with its ranks.
struct FlightMismatch {
  uint64_t seq = 0;
  struct Call {
    Fingerprint call;
    std::vector<int> ranks;
  };
  std::vector<Call> calls;
  int64_t later = 0;  // how many higher seqs differ too
};

// The collective the communicator stopped in: the highest seq some rank started and did not
// complete (in flight or failed at its dump).
struct FlightStall {
  Fingerprint call;
  bool failed = false;  // some rank's entry of it failed
  struct Waiter {
    int rank = 0;
    double waited_s = 0;  // from entering it to its failure or its dump
    bool failed = false;
    std::string error;
  };
  std::vector<Waiter> waiting;  // in it at their dumps
  struct Absent {
    int rank = 0;
    std::optional<Fingerprint> last_completed;  // none when it completed nothing recorded here
    std::optional<Fingerprint> in_flight;       // a lower collective it was still in
  };
  std::vector<Absent> never_entered;  // dumped members whose last entry is older
  std::vector<int> completed;         // ranks that completed it
  std::vector<int> named;             // ranks the waiters' errors name (waiting_for), ascending
};

// Who arrived last over the last collectives that every member completed: in each, the rank with
// the least time inside (completed_s - started_s) arrived last; the others waited for it.
struct FlightSlowest {
  int rank = -1;       // -1 when no collective had one rank clearly last
  int64_t last = 0;    // in how many it arrived last
  int64_t window = 0;  // how many collectives were compared
  uint64_t first_seq = 0, last_seq = 0;
  double share = 0;            // last / window
  double mean_late_ms = 0;     // mean over those of (median of the others' time inside - its own)
  bool beyond_chance = false;  // share >= 0.5 and more than an even run gives (3 sigma)
  std::vector<std::pair<int, int64_t>> counts;  // every rank that arrived last, by rank
};

struct FlightCommReport {
  FlightCommKey key;
  std::vector<int> members;  // the dumped ranks that belong to it
  std::optional<FlightMismatch> mismatch;
  std::optional<FlightStall> stall;
  FlightSlowest slowest;
};

enum class FlightCause { None, Mismatch, NeverEntered, Named, NoDump, Straggler };

// The first cause found, in this priority: a mismatch; a rank that never entered the collective
// the others stopped in, a rank their errors name, a rank that wrote no dump while they waited;
// a straggler. headline is one line naming collectives as the errors do; evidence follows it.
struct FlightVerdict {
  FlightCause cause = FlightCause::None;
  std::vector<int> ranks;  // the ranks it blames
  std::string headline;
  std::vector<std::string> evidence;
};

struct FlightReportOptions {
  int64_t last = 100;  // the straggler window: the last N collectives every member completed
  // When every dump is a live snapshot (SIGUSR1), an in-flight collective counts as one the job
  // stopped in only once a rank has waited in it this long: the ranks are caught mid-step.
  double live_wait_s = 1.0;
};

struct FlightAnalysis {
  int world = 0;                        // the largest `world` of the dumps
  std::vector<int> dumped;              // ranks with a dump, ascending
  std::vector<int> missing;             // ranks below world without one
  std::vector<FlightCommReport> comms;  // by key
  FlightVerdict verdict;
};

// dumps as read_flight_dumps returns them (one per rank, any order).
FlightAnalysis analyze_flight(const std::vector<FlightDump>& dumps,
                              const FlightReportOptions& options = {});

// "rank 2", "ranks 0, 2", "ranks 0-3, 7" (runs of three or more as a range).
std::string flight_rank_list(const std::vector<int>& ranks);

}  // namespace engine::comm
