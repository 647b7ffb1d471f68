// apps/ring_demo/run.h: runs the real ring all_reduce of comm/ (W ranks as threads over the
// in-memory transport) with a RingObserver on every rank, and turns what the observers saw into
// frames: the state of every rank's buffer at the start and after each step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/algorithms/ring_schedule.h"
#include "comm/base/reduce.h"
#include "comm/communicator.h"

namespace engine::ring_demo {

// Counts up to this many elements are shown value by value (and the ranks run in lockstep so that
// the observers can copy the chunks); larger ones only by chunk ranges.
constexpr size_t kShowValuesMax = 1024;
constexpr int kMaxWorld = 64;

struct Config {
  int world = 4;
  size_t count = 8;  // float32 elements per rank
  comm::ReduceOp op = comm::ReduceOp::Sum;
  size_t segment = 0;         // pipelining grain in elements; 0 = one segment per chunk
  std::vector<float> values;  // world * count, rank-major; empty = rank r holds r*100 + i
};

// What one rank did in one step.
struct Move {
  int rank = 0, to = 0, from = 0;  // sends to its right neighbour, receives from its left one
  int send_chunk = 0, recv_chunk = 0;
  comm::Range sent, received;  // element ranges of the buffer
  // Filled when values are shown: what went out, what came in, the received chunk afterwards.
  std::vector<float> sent_values, recv_values, result_values;
};

struct Frame {
  std::string title;  // "start", "reduce-scatter step 1 of 3", ...
  bool is_start = true;
  comm::RingPhase phase = comm::RingPhase::ReduceScatter;
  int step = 0;                              // within the phase
  std::vector<Move> moves;                   // one per rank, by rank; empty for the start
  std::vector<std::vector<float>> buffers;   // [rank][element] after the step (values shown)
  std::vector<std::vector<uint64_t>> holds;  // [rank][chunk]: bit q = rank q's input is in it
};

struct DemoRun {
  Config cfg;
  bool values_shown = false;
  size_t segments_per_chunk = 1;
  std::vector<comm::Range> chunks;
  std::vector<Frame> frames;  // start, W-1 reduce-scatter steps, W-1 all-gather steps
  std::vector<std::vector<float>> initial, final, expected;  // [rank][element]
  std::vector<size_t> bytes_sent, steps_sent;                // per rank, as the observers saw
  bool frames_match_final = true;  // the frames' last buffers equal the real final buffers
};

// How the demo words an op: as --op spells it ("avg"), what a reduce-scatter receive does with
// the arriving chunk ("adds"), and what element i of the result is over the ranks ("mean").
struct OpWords {
  comm::ReduceOp op;
  const char* name;
  const char* verb;
  const char* noun;
};
const OpWords& op_words(comm::ReduceOp op);

// Throws engine::Error naming the flag when cfg is out of the demo's range.
void check_config(const Config& cfg);

// One all_reduce of cfg.count floats (bufs[r]: rank r's, in place) on cfg.world ranks as threads
// over the in-memory transport, obs watching every rank; on_error (optional) runs on a rank's
// failure, before the first error is rethrown.
void all_reduce_as_threads(const Config& cfg, const comm::CommOptions& opts,
                           std::vector<std::vector<float>>& bufs, comm::RingObserver& obs,
                           const std::function<void()>& on_error = nullptr);

// Runs the collective; throws engine::Error for a bad configuration or a failed collective.
DemoRun run_demo(const Config& cfg);

// Direct computation of the reduction of per-rank buffers (the reference the ring is checked
// against), and whether got is within float rounding of it.
std::vector<float> direct_reduce(const std::vector<std::vector<float>>& inputs, comm::ReduceOp op);
bool close_enough(const std::vector<std::vector<float>>& inputs, comm::ReduceOp op, size_t i,
                  float got, float want);

}  // namespace engine::ring_demo
