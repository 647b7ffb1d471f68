// apps/ring_demo/run.cpp: see run.h.
//
// How the observers see consistent chunks: on_step runs on each rank's own thread once all of that
// step's receives are in. When values are shown, every rank waits there for all the others (a
// lockstep barrier), so no rank sends beyond the next step before everyone has copied this one,
// and the chunk a rank just received is never the one the next step writes: the copy is race-free.
// The observer copies only the received chunk; the rest of each buffer is rebuilt from earlier
// frames (a rank's chunks change only when it receives them, and, for avg, when the owner divides
// its finished chunk before the all-gather).
#include "apps/ring_demo/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include "comm/rendezvous/rendezvous.h"
#include "core/error.h"

namespace engine::ring_demo {
namespace {

using comm::Range;
using comm::RingPhase;

// All ranks meet here after each step; bounded wait, and abort() frees everyone after a failure.
class Lockstep {
 public:
  explicit Lockstep(int n) : n_(n) {}
  void arrive_and_wait(int rank) {
    std::unique_lock lk(mu_);
    if (aborted_) ENGINE_FAIL("ring_demo: rank ", rank, " stops: another rank failed");
    const uint64_t gen = gen_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lk, std::chrono::seconds(60), [&] { return gen_ != gen || aborted_; }))
      throw TimeoutError("ring_demo: rank " + std::to_string(rank) +
                         " waited 60 s for the other ranks to finish a step");
    if (aborted_) ENGINE_FAIL("ring_demo: rank ", rank, " stops: another rank failed");
  }
  void abort() {
    std::lock_guard lk(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, waiting_ = 0;
  uint64_t gen_ = 0;
  bool aborted_ = false;
};

// One observer for all ranks: each rank's thread writes only its own slots.
class Recorder : public comm::RingObserver {
 public:
  Recorder(int world, bool copy_values) : world_(world), copy_(copy_values), lockstep_(world) {
    seen_.resize(2 * (world - 1) * world);
    bytes_.assign(world, 0);
    steps_.assign(world, 0);
  }
  void on_step(const comm::RingStepInfo& info) override {
    const int index = (info.phase == RingPhase::ReduceScatter ? 0 : world_ - 1) + info.step;
    Move& m = seen_[index * world_ + info.rank];
    m.rank = info.rank;
    m.to = info.right;
    m.from = info.left;
    m.send_chunk = info.send_chunk;
    m.recv_chunk = info.recv_chunk;
    m.sent = info.sent;
    m.received = info.received;
    bytes_[info.rank] += info.sent.size() * sizeof(float);
    ++steps_[info.rank];
    if (!copy_) return;
    const auto* buf = static_cast<const float*>(info.buffer);
    m.result_values.assign(buf + info.received.begin, buf + info.received.end);
    lockstep_.arrive_and_wait(info.rank);
  }
  const Move& seen(int step_index, int rank) const { return seen_[step_index * world_ + rank]; }
  Lockstep& lockstep() { return lockstep_; }
  const std::vector<size_t>& bytes() const { return bytes_; }
  const std::vector<size_t>& steps() const { return steps_; }

 private:
  int world_;
  bool copy_;
  Lockstep lockstep_;
  std::vector<Move> seen_;  // [step index][rank]
  std::vector<size_t> bytes_, steps_;
};

std::vector<float> slice(const std::vector<float>& v, Range r) {
  return {v.begin() + r.begin, v.begin() + r.end};
}

void put(std::vector<float>& v, Range r, const std::vector<float>& vals) {
  std::copy(vals.begin(), vals.end(), v.begin() + r.begin);
}

// Runs all_reduce on every rank's thread; rethrows the first failure.
void run_ranks(const Config& cfg, std::vector<std::vector<float>>& bufs, Recorder& rec,
               size_t segment_bytes) {
  comm::CommOptions opts;
  opts.timeout = comm::Millis(60000);
  opts.segment_bytes = segment_bytes;
  opts.algo = comm::Algo::Ring;  // this page watches the ring, whatever auto would pick
  all_reduce_as_threads(cfg, opts, bufs, rec, [&rec] { rec.lockstep().abort(); });
}

}  // namespace

void all_reduce_as_threads(const Config& cfg, const comm::CommOptions& opts,
                           std::vector<std::vector<float>>& bufs, comm::RingObserver& obs,
                           const std::function<void()>& on_error) {
  auto comms = comm::make_mem_communicators(cfg.world, opts);
  std::vector<std::exception_ptr> errors(cfg.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < cfg.world; ++r) {
    comms[r]->set_ring_observer(&obs);
    threads.emplace_back([&, r] {
      try {
        comms[r]->all_reduce(bufs[r].data(), cfg.count, DType::F32, cfg.op);
      } catch (...) {
        errors[r] = std::current_exception();
        if (on_error) on_error();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void check_config(const Config& c) {
  ENGINE_CHECK(c.world >= 1 && c.world <= kMaxWorld, "--world-size must be 1..", kMaxWorld,
               ", got ", c.world);
  ENGINE_CHECK(c.count <= (size_t{1} << 26) / c.world, "--count ", c.count, " x ", c.world,
               " ranks is more than this demo holds (", (size_t{1} << 26), " elements in all)");
  ENGINE_CHECK(c.segment == 0 || c.segment >= 2,
               "--segment must be at least 2 elements (the communicator's minimum is 8 bytes)");
  ENGINE_CHECK(c.values.empty() || c.values.size() == c.count * c.world, "--values: want ",
               c.count * c.world, " numbers (", c.world, " ranks x ", c.count, "), got ",
               c.values.size());
}

const OpWords& op_words(comm::ReduceOp op) {
  static const OpWords kWords[] = {
      {comm::ReduceOp::Sum, "sum", "adds", "sum"},
      {comm::ReduceOp::Avg, "avg", "adds", "mean"},
      {comm::ReduceOp::Max, "max", "keeps the max", "max"},
      {comm::ReduceOp::Min, "min", "keeps the min", "min"},
      {comm::ReduceOp::Prod, "prod", "multiplies", "product"},
  };
  for (const OpWords& w : kWords)
    if (w.op == op) return w;
  return kWords[0];
}

std::vector<float> direct_reduce(const std::vector<std::vector<float>>& inputs, comm::ReduceOp op) {
  const size_t n = inputs.empty() ? 0 : inputs[0].size();
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    double acc = inputs[0][i];
    for (size_t r = 1; r < inputs.size(); ++r) {
      const double v = inputs[r][i];
      switch (op) {
        case comm::ReduceOp::Max:
          acc = std::max(acc, v);
          break;
        case comm::ReduceOp::Min:
          acc = std::min(acc, v);
          break;
        case comm::ReduceOp::Prod:
          acc *= v;
          break;
        default:
          acc += v;
      }
    }
    if (op == comm::ReduceOp::Avg) acc /= static_cast<double>(inputs.size());
    out[i] = static_cast<float>(acc);
  }
  return out;
}

bool close_enough(const std::vector<std::vector<float>>& inputs, comm::ReduceOp op, size_t i,
                  float got, float want) {
  if (got == want) return true;
  if (op == comm::ReduceOp::Max || op == comm::ReduceOp::Min) return false;
  // The ring adds in another order than the direct loop: allow float rounding of each addition.
  double scale = 0;
  for (auto& in : inputs) scale += std::fabs(in[i]);
  if (op == comm::ReduceOp::Prod) scale = std::fabs(want);
  if (op == comm::ReduceOp::Avg) scale /= static_cast<double>(inputs.size());
  const double tol =
      4.0 * static_cast<double>(inputs.size()) * std::numeric_limits<float>::epsilon() * scale;
  return std::fabs(static_cast<double>(got) - want) <= tol;
}

DemoRun run_demo(const Config& cfg) {
  check_config(cfg);
  const int W = cfg.world;
  const size_t N = cfg.count;
  DemoRun run;
  run.cfg = cfg;
  run.values_shown = N <= kShowValuesMax;
  const comm::RingSchedule sched(0, W, N);
  for (int c = 0; c < W; ++c) run.chunks.push_back(sched.chunk(c));
  const size_t segment = cfg.segment ? cfg.segment : std::max<size_t>(2, sched.max_chunk());
  run.segments_per_chunk = sched.segments(segment);

  run.initial.assign(W, std::vector<float>(N));
  for (int r = 0; r < W; ++r)
    for (size_t i = 0; i < N; ++i)
      run.initial[r][i] =
          cfg.values.empty() ? static_cast<float>(r * 100 + i) : cfg.values[r * N + i];
  run.expected.assign(W, direct_reduce(run.initial, cfg.op));

  Recorder rec(W, run.values_shown);
  run.final = run.initial;
  run_ranks(cfg, run.final, rec, segment * sizeof(float));
  run.bytes_sent = rec.bytes();
  run.steps_sent = rec.steps();

  // Frame 0: every rank holds its own input, and only its own contribution in each chunk.
  Frame start;
  start.title = "start";
  if (run.values_shown) start.buffers = run.initial;
  start.holds.assign(W, std::vector<uint64_t>(W));
  for (int r = 0; r < W; ++r)
    for (int c = 0; c < W; ++c) start.holds[r][c] = uint64_t{1} << r;
  run.frames.push_back(start);

  const bool avg = cfg.op == comm::ReduceOp::Avg;
  for (int k = 0; k < 2 * (W - 1); ++k) {
    const Frame& prev = run.frames.back();
    Frame f = prev;
    f.moves.clear();
    f.is_start = false;
    f.phase = k < W - 1 ? RingPhase::ReduceScatter : RingPhase::AllGather;
    f.step = k < W - 1 ? k : k - (W - 1);
    f.title = std::string(comm::ring_phase_name(f.phase)) + " step " + std::to_string(f.step + 1) +
              " of " + std::to_string(W - 1);
    const bool divided = avg && f.phase == RingPhase::AllGather && f.step == 0;
    for (int r = 0; r < W; ++r) {
      Move m = rec.seen(k, r);
      const Move& left = rec.seen(k, m.from);
      ENGINE_CHECK(left.send_chunk == m.recv_chunk, "ring_demo: rank ", m.from, " sent chunk ",
                   left.send_chunk, " but rank ", r, " expected chunk ", m.recv_chunk);
      // What arrives is what the left neighbour holds in that chunk (the all-gather copies it).
      const uint64_t incoming = prev.holds[m.from][m.recv_chunk];
      f.holds[r][m.recv_chunk] =
          f.phase == RingPhase::ReduceScatter ? (prev.holds[r][m.recv_chunk] | incoming) : incoming;
      // avg: the owner divides its finished chunk just before the all-gather sends it; the copy
      // its right neighbour received is exactly what left.
      if (run.values_shown)
        m.sent_values = divided ? rec.seen(k, m.to).result_values : slice(prev.buffers[r], m.sent);
      f.moves.push_back(std::move(m));
    }
    if (run.values_shown)
      for (Move& m : f.moves) {
        m.recv_values = f.moves[m.from].sent_values;
        if (divided) put(f.buffers[m.rank], m.sent, m.sent_values);
        put(f.buffers[m.rank], m.received, m.result_values);
      }
    run.frames.push_back(std::move(f));
  }
  if (run.values_shown) run.frames_match_final = run.frames.back().buffers == run.final;
  return run;
}

}  // namespace engine::ring_demo
