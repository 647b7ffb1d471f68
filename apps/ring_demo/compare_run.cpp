// apps/ring_demo/compare_run.cpp: the measured half of `ring_demo --compare` (compare.h): every
// all_reduce algorithm run for real (ranks as threads over the in-memory transport) at a few
// sizes and world sizes, beside its step-count model with alpha and beta fitted on this machine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "apps/ring_demo/compare.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/error.h"

namespace engine::ring_demo {
namespace {

std::string str(const char* fmt, auto... args) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, fmt, args...)), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

constexpr comm::Algo kAlgos[] = {comm::Algo::Ring, comm::Algo::Rd, comm::Algo::Rh,
                                 comm::Algo::Tree};
constexpr int kWorlds[] = {2, 4, 8};
constexpr size_t kSizes[] = {8, 64 << 10, 1 << 20};

constexpr int kBatches = 3;

int iters_for(size_t bytes) {
  return bytes <= 1024 ? 200 : bytes <= (256 << 10) ? 40 : 8;
}

// Seconds per all_reduce of `bytes` per rank for each algorithm: one warm-up call, then kBatches
// timed batches; each rank's best batch mean, the slowest rank's (other programs on the machine
// slow single batches down).
std::vector<std::vector<double>> measure(int W, const std::vector<size_t>& sizes) {
  comm::CommOptions o;
  o.timeout = comm::Millis(60000);
  auto comms = comm::make_mem_communicators(W, o);
  const size_t cells = sizes.size() * std::size(kAlgos);
  std::vector<std::vector<double>> per_rank(W, std::vector<double>(cells));
  std::vector<std::exception_ptr> errors(W);
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r)
    threads.emplace_back([&, r] {
      try {
        comm::Communicator& c = *comms[r];
        for (size_t s = 0; s < sizes.size(); ++s) {
          std::vector<float> buf(sizes[s] / sizeof(float), 1.0f);
          for (size_t a = 0; a < std::size(kAlgos); ++a) {
            c.set_algo(kAlgos[a]);
            c.all_reduce(buf.data(), buf.size(), DType::F32);
            const int n = iters_for(sizes[s]);
            double best = 1e30;
            for (int batch = 0; batch < kBatches; ++batch) {
              c.barrier();
              const auto t0 = std::chrono::steady_clock::now();
              for (int i = 0; i < n; ++i) c.all_reduce(buf.data(), buf.size(), DType::F32);
              const std::chrono::duration<double> d = std::chrono::steady_clock::now() - t0;
              best = std::min(best, d.count() / n);
            }
            per_rank[r][s * std::size(kAlgos) + a] = best;
          }
        }
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<std::vector<double>> out(sizes.size(), std::vector<double>(std::size(kAlgos)));
  for (size_t k = 0; k < cells; ++k)
    for (int r = 0; r < W; ++r)
      out[k / std::size(kAlgos)][k % std::size(kAlgos)] =
          std::max(out[k / std::size(kAlgos)][k % std::size(kAlgos)], per_rank[r][k]);
  return out;
}

std::string dur(double s) {
  if (s >= 1e-3) return str("%7.2f ms", s * 1e3);
  return str("%7.1f us", s * 1e6);
}

std::string bytes_text(size_t b) {
  if (b >= (1 << 20)) return str("%zu MiB", b >> 20);
  if (b >= 1024) return str("%zu KiB", b >> 10);
  return str("%zu B", b);
}

}  // namespace

// Rounds and bytes each algorithm sends per rank (comm/algorithms/): W = p + rem, p a power of
// two; folding the rem extra ranks in and out costs two more rounds of the whole buffer.
double algo_model_seconds(comm::Algo a, int W, double bytes, double alpha, double beta) {
  int p = 1, lg = 0, lw = 0;
  while (p * 2 <= W) p *= 2, ++lg;
  while ((1 << lw) < W) ++lw;
  const double fold = W > p ? 2 * (alpha + bytes / beta) : 0;
  switch (a) {
    case comm::Algo::Rd:
      return lg * (alpha + bytes / beta) + fold;
    case comm::Algo::Rh:
      return 2 * lg * alpha + 2.0 * (p - 1) / p * bytes / beta + fold;
    case comm::Algo::Tree:
      return 2 * lw * (alpha + bytes / beta);
    default:
      return 2.0 * (W - 1) * (alpha + bytes / W / beta);
  }
}

std::string measured_compare() {
  std::vector<std::vector<std::vector<double>>> runs;  // [world][size][algorithm]
  for (int W : kWorlds) runs.push_back(measure(W, {std::begin(kSizes), std::end(kSizes)}));
  // alpha and beta of this machine's in-memory transport, from recursive doubling at W = 2 (one
  // exchange of the whole buffer): 8 bytes give alpha, 1 MiB beta.
  const double alpha = runs[0][0][1];
  const double beta = (1 << 20) / std::max(1e-9, runs[0][2][1] - alpha);
  std::string s = str(
      "\nMeasured here: every all_reduce algorithm of comm/ run for real (ranks as threads over "
      "the\nin-memory transport; the slowest rank's best of 3 batch means), beside its alpha-beta "
      "model with alpha "
      "= %.1f us\nand beta = %.3f GB/s fitted on this machine (one exchange of 8 B and of 1 MiB "
      "between 2 ranks).\nModels: ring 2(W-1)(alpha + B/(W beta)); rd log2 p (alpha + B/beta); "
      "rh 2 log2 p alpha +\n2(p-1)/p B/beta; tree 2 ceil(log2 W)(alpha + B/beta); p the largest "
      "power of two <= W, and\n2 (alpha + B/beta) more for rd and rh when W > p.\n\n",
      alpha * 1e6, beta / 1e9);
  s += str("  %3s %8s |", "W", "B");
  for (comm::Algo a : kAlgos)
    s += str(" %-21s|", (std::string(comm::algo_name(a)) + " measured / model").c_str());
  s += "  fastest\n";
  for (size_t w = 0; w < std::size(kWorlds); ++w) {
    const int W = kWorlds[w];
    const auto& m = runs[w];
    for (size_t k = 0; k < std::size(kSizes); ++k) {
      s += str("  %3d %8s |", W, bytes_text(kSizes[k]).c_str());
      size_t best = 0;
      for (size_t a = 0; a < std::size(kAlgos); ++a) {
        const double model = algo_model_seconds(kAlgos[a], W, double(kSizes[k]), alpha, beta);
        s += str(" %s %s |", dur(m[k][a]).c_str(), dur(model).c_str());
        if (m[k][a] < m[k][best]) best = a;
      }
      s += str("  %s\n", comm::algo_name(kAlgos[best]));
    }
  }
  s += "\nWhere each wins: rd at small sizes, where latency is all there is (log2 W rounds "
       "against the\nring's 2(W-1) steps); the ring and rh at large ones, where bytes are all "
       "there is (each rank\nsends 2(W-1)/W of the buffer, rd log2 W whole buffers); rh between, "
       "with the ring's bytes in\nfewer rounds; tree sends whole buffers 2 log2 W times, and is "
       "the shape of broadcast and\nreduce. With more ranks than cores (W = 8 here) waiting for a "
       "rank to be scheduled costs more\nthan alpha, so measured times sit above the model. "
       "`auto` (comm/algorithms/tuning.cpp) picks\nby size from crossovers measured with "
       "allreduce_bench --algo all.\n";
  return s;
}

}  // namespace engine::ring_demo
