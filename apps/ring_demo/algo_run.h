// apps/ring_demo/algo_run.h: `ring_demo --algo rd|rh|tree`: the real all_reduce of comm/ by
// recursive doubling, Rabenseifner's halving-doubling or binomial trees (comm/algorithms/), W ranks
// as threads over the in-memory transport, every rank's every round recorded by an observer
// (comm::RingObserver::on_algo_step), printed round by round and drawn as SVG and HTML.
#pragma once
#include <string>
#include <vector>

#include "apps/ring_demo/run.h"
#include "comm/algorithms/tuning.h"

namespace engine::ring_demo {

// What one rank did in one round.
struct AlgoMove {
  int rank = 0;
  std::string phase;
  int send_to = -1, recv_from = -1;  // -1: none this round
  comm::Range sent, received;
  bool reduced = false;
  std::vector<float> buffer;  // the rank's working buffer after the round (values shown)
};

struct AlgoRound {
  int round = 0;
  std::string phase;
  std::vector<AlgoMove> moves;  // the ranks that acted, by rank
};

struct AlgoRun {
  Config cfg;
  comm::Algo algo = comm::Algo::Rd;
  bool values_shown = false;
  std::vector<AlgoRound> rounds;  // in order, rounds where no rank acted left out
  std::vector<std::vector<float>> initial, final, expected;  // [rank][element]
  std::vector<size_t> bytes_sent;                            // per rank
};

// Runs the collective with cfg (cfg.segment ignored: one segment, rounds one by one); throws
// engine::Error for a bad configuration or a failed collective.
AlgoRun run_algo_demo(const Config& cfg, comm::Algo algo);

// What the algorithm does, every round of every rank, and the check of the result (ok: every
// rank's result equals the direct computation).
std::string algo_report(const AlgoRun& run, bool* ok);

// One SVG panel per round (ranks on a circle, an arrow per message labelled with its elements),
// and a page stepping through them with their text.
std::string render_algo_svg(const AlgoRun& run);
std::string render_algo_html(const AlgoRun& run);

}  // namespace engine::ring_demo
