// parallel/straggler.h: who makes everyone wait (train's straggler line and --metrics keys;
// docs/launchers.md "Finding the slow rank"). Clock-free: in a collective the others wait for the
// rank that arrives last, so the rank that spends the least time inside it is the one that came
// last, and each other rank's time inside beyond that minimum is how long it waited. Every rank
// reads its own times inside the job communicator's collectives from the flight recorder
// (comm/health/flight_recorder.h); every interval they are gathered at rank 0 (one small gather),
// which scores them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace engine::parallel {

// Scores over the ranks of an interval (or of several, added up).
struct StragglerScore {
  int64_t collectives = 0, steps = 0;
  std::vector<int64_t> last_count;  // per rank: collectives it arrived last in
  std::vector<double> late_sum_ms;  // per rank: over those, the others' median inside minus its
  std::vector<double> wait_ms;      // per rank: time inside beyond the last arrival's
  std::vector<double> compute_ms;   // per rank: time of the steps outside collectives
  // From the sums (finish): the rank arrived last most often, its share of the collectives, how
  // late it came on average, and whether it stands out: share >= kShare and three standard
  // deviations above a fair 1/W over the steps, while the others wait, on average, at least
  // kWaitShare of a step.
  int rank = -1;
  double share = 0, late_ms = 0;
  bool stands_out = false;
  static constexpr double kShare = 0.6, kWaitShare = 0.2;

  void add(const StragglerScore& o);  // another interval of the same ranks
  void finish();
  double wait_ms_per_step(int r) const { return steps ? wait_ms[r] / steps : 0; }
  double compute_ms_per_step(int r) const { return steps ? compute_ms[r] / steps : 0; }
};

// inside_s[r][i]: rank r's seconds inside collective i (the same collectives on every rank, in
// order; a negative time: not recorded, the collective left out); busy_s[r]: rank r's wall time
// of the interval's `steps` steps less its time inside every collective of them. Finished.
StragglerScore score_stragglers(const std::vector<std::vector<double>>& inside_s,
                                const std::vector<double>& busy_s, int64_t steps);

// "rank 1 is the straggler: last into 94% of all_reduces, 21.4 ms late on average (its step
// computes 58 ms, the others 37 ms)".
std::string straggler_line(const StragglerScore& s);

// Watches one communicator through an epoch: every kSteps steps (and at the epoch's end) each
// rank's times inside its collectives since the last interval (from the flight recorder) are
// gathered at every rank and scored; the intervals add up to the epoch's score.
class StragglerWatch {
 public:
  static constexpr int64_t kSteps = 20;
  // The collectives of an interval that are scored: its last kSlots.
  static constexpr int kSlots = 256;

  // An epoch starts (or goes on after a membership change: c is the new communicator).
  void begin_epoch(comm::Communicator& c);
  // After each optimizer step, and once at the epoch's end (epoch_end): at an interval's end (an
  // all_gather of c, at the same step on every rank), the line to print when a rank starts or
  // stops standing out ("rank 1 is the straggler: ...", "rank 1 is no longer the straggler
  // (...)"); "" otherwise.
  std::string step(comm::Communicator& c, bool epoch_end);
  const StragglerScore& epoch() const { return epoch_; }

  // One interval of `steps` steps, and the next one starts (nullopt with one rank).
  std::optional<StragglerScore> interval(comm::Communicator& c, int64_t steps);

 private:
  void start(comm::Communicator& c);
  uint64_t first_seq_ = 0;  // the interval's first collective
  double start_s_ = 0;      // on the flight recorder's clock
  int64_t steps_ = 0;       // since the interval started
  StragglerScore epoch_;
  int named_ = -1;  // the rank standing out, as last said
};

}  // namespace engine::parallel
