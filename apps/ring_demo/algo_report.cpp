// apps/ring_demo/algo_report.cpp: the text of `ring_demo --algo rd|rh|tree` (algo_run.h).
#include <cstdio>

#include "apps/ring_demo/algo_run.h"
#include "apps/ring_demo/report.h"

namespace engine::ring_demo {
namespace {

std::string str(const char* fmt, auto... args) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, fmt, args...)), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

std::string range(comm::Range r) {
  return str("[%zu,%zu)", r.begin, r.end);
}

const char* explain(comm::Algo a) {
  switch (a) {
    case comm::Algo::Rd:
      return "Recursive doubling: in round k every rank swaps its whole buffer with the rank "
             "whose\n"
             "number differs in bit k, and both combine the two. After log2 W rounds every rank\n"
             "holds the result: few rounds of the whole buffer, so it wins where a message's\n"
             "latency costs more than its bytes (small buffers). When W is not a power of two the\n"
             "first 2(W-p) ranks pair up first (fold: each even one hands its buffer to the odd\n"
             "one after it) and get the result back at the end (unfold).\n";
    case comm::Algo::Rh:
      return "Rabenseifner's halving-doubling: the buffer is cut into p blocks (p: the largest "
             "power\n"
             "of two <= W). Reduce-scatter by recursive halving: partners at distance p/2, p/4,\n"
             "..., 1 each keep half of what they still work on and send the other half, so after\n"
             "log2 p rounds virtual rank v owns block v reduced over all ranks. All-gather by\n"
             "recursive doubling: the same partners in reverse swap their finished blocks. Each\n"
             "rank sends 2(p-1)/p of the buffer as the ring does, in 2 log2 p rounds instead of\n"
             "2(W-1) steps. Extra ranks fold in first and get the result at the end.\n";
    default:
      return "Binomial trees: reduce to rank 0 (round k: every rank whose lowest set bit is 2^k\n"
             "sends its partial result to the rank 2^k below it, which combines it), then\n"
             "broadcast from rank 0 (the same tree backwards: every rank that has the result\n"
             "sends it on). 2 ceil(log2 W) rounds, but each sends the whole buffer: good for\n"
             "small buffers, and the shape of broadcast and reduce on their own.\n";
  }
}

std::string move_line(const AlgoRun& run, const AlgoMove& m) {
  std::string s = str("  rank %d:", m.rank);
  if (m.send_to >= 0) s += str(" sends %s to rank %d", range(m.sent).c_str(), m.send_to);
  if (m.recv_from >= 0)
    s += str("%s receives %s from rank %d and %s it", m.send_to >= 0 ? "," : "",
             range(m.received).c_str(), m.recv_from,
             m.reduced ? op_words(run.cfg.op).verb : "stores");
  if (run.values_shown)
    s += "\n          now " + format_buffer(m.buffer, {comm::Range{0, run.cfg.count}});
  return s + "\n";
}

}  // namespace

std::string algo_report(const AlgoRun& run, bool* ok) {
  const Config& c = run.cfg;
  const int W = c.world;
  std::string s = str(
      "All-reduce by %s: %d rank%s (threads over the in-memory transport), %zu float32 per rank, "
      "op %s.\nThis is comm/'s real all_reduce with --algo %s; an observer records every "
      "round.\n\n",
      comm::algo_name(run.algo), W, W == 1 ? "" : "s", c.count, op_words(c.op).name,
      comm::algo_name(run.algo));
  s += explain(run.algo);
  s += "\nstart\n";
  for (int r = 0; r < W && run.values_shown; ++r)
    s += str("  rank %d: ", r) + format_buffer(run.initial[r], {comm::Range{0, c.count}}) + "\n";
  for (const AlgoRound& rd : run.rounds) {
    s += str("\nround %d (%s)\n", rd.round, rd.phase.c_str());
    for (const AlgoMove& m : rd.moves) s += move_line(run, m);
  }
  bool all = true;
  for (int r = 0; r < W; ++r)
    for (size_t i = 0; i < c.count; ++i)
      all = all && close_enough(run.initial, c.op, i, run.final[r][i], run.expected[r][i]);
  *ok = all;
  s += str("\nresult: %s\n", all ? "every rank's buffer equals the direct computation"
                                 : "MISMATCH against the direct computation");
  if (run.values_shown) s += "  " + format_buffer(run.final[0], {comm::Range{0, c.count}}) + "\n";
  size_t most = 0;
  for (size_t b : run.bytes_sent) most = std::max(most, b);
  s +=
      str("%zu rounds (the ring takes %d steps); the busiest rank sent %zu bytes (the ring: %zu)\n",
          run.rounds.size(), 2 * (W - 1), most,
          W > 1 ? 2 * (W - 1) * ((c.count + W - 1) / W) * sizeof(float) : 0);
  return s;
}

}  // namespace engine::ring_demo
