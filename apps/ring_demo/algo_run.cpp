// apps/ring_demo/algo_run.cpp: see algo_run.h. The observer runs on each rank's thread after a
// round's send and receive completed; until that thread goes on, nothing writes its buffer (the
// next round's receive is posted by the same thread later), so copying it there is race-free.
#include "apps/ring_demo/algo_run.h"

#include <map>
#include <mutex>
#include <thread>

#include "apps/ring_demo/report.h"
#include "apps/ring_demo/run.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/error.h"

namespace engine::ring_demo {
namespace {

class AlgoRecorder : public comm::RingObserver {
 public:
  explicit AlgoRecorder(bool copy) : copy_(copy) {}
  void on_step(const comm::RingStepInfo&) override {}
  void on_algo_step(const comm::AlgoStepInfo& s) override {
    AlgoMove m;
    m.rank = s.rank;
    m.phase = s.phase;
    m.send_to = s.send_to;
    m.recv_from = s.recv_from;
    m.sent = s.sent;
    m.received = s.received;
    m.reduced = s.reduced;
    if (copy_) {
      const auto* b = static_cast<const float*>(s.buffer);
      m.buffer.assign(b, b + s.count);
    }
    std::lock_guard lk(mu_);
    rounds_[s.round].push_back(std::move(m));
  }
  std::map<int, std::vector<AlgoMove>> take() { return std::move(rounds_); }

 private:
  bool copy_;
  std::mutex mu_;
  std::map<int, std::vector<AlgoMove>> rounds_;
};

void run_threads(const Config& cfg, comm::Algo algo, std::vector<std::vector<float>>& bufs,
                 AlgoRecorder& rec) {
  comm::CommOptions opts;
  opts.timeout = comm::Millis(60000);
  opts.segment_bytes = std::max<size_t>(8, cfg.count * sizeof(float));  // one segment
  opts.algo = algo;
  all_reduce_as_threads(cfg, opts, bufs, rec);
}

}  // namespace

AlgoRun run_algo_demo(const Config& cfg, comm::Algo algo) {
  check_config(cfg);
  const int W = cfg.world;
  const size_t N = cfg.count;
  AlgoRun run;
  run.cfg = cfg;
  run.algo = algo;
  run.values_shown = N <= kShowValuesMax;
  run.initial.assign(W, std::vector<float>(N));
  for (int r = 0; r < W; ++r)
    for (size_t i = 0; i < N; ++i)
      run.initial[r][i] =
          cfg.values.empty() ? static_cast<float>(r * 100 + i) : cfg.values[r * N + i];
  run.expected.assign(W, direct_reduce(run.initial, cfg.op));
  run.final = run.initial;
  AlgoRecorder rec(run.values_shown);
  run_threads(cfg, algo, run.final, rec);
  run.bytes_sent.assign(W, 0);
  for (auto& [round, moves] : rec.take()) {
    std::sort(moves.begin(), moves.end(),
              [](const AlgoMove& a, const AlgoMove& b) { return a.rank < b.rank; });
    AlgoRound ar;
    ar.round = round;
    ar.phase = moves.front().phase;
    for (const AlgoMove& m : moves)
      if (m.send_to >= 0) run.bytes_sent[m.rank] += m.sent.size() * sizeof(float);
    ar.moves = std::move(moves);
    run.rounds.push_back(std::move(ar));
  }
  return run;
}

}  // namespace engine::ring_demo
