// apps/ring_demo/compare.cpp: see compare.h.
//
// The model (Hockney's alpha-beta): a message of n bytes between two ranks takes alpha + n/beta.
// Every rank has one full-duplex link: it sends one message at a time while it may receive one.
// Reductions are taken as free (memory is much faster than the link).
#include "apps/ring_demo/compare.h"

#include <cstdio>

namespace engine::ring_demo {
namespace {

std::string str(const char* fmt, auto... args) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, fmt, args...)), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

// Seconds as the friendliest unit.
std::string dur(double s) {
  if (s >= 1) return str("%7.2f s ", s);
  if (s >= 1e-3) return str("%7.2f ms", s * 1e3);
  return str("%7.1f us", s * 1e6);
}

std::string mb(double bytes) {
  return str("%9.3f MB", bytes / 1e6);
}

}  // namespace

// Reduce-scatter then all-gather: 2(W-1) steps, each sends one chunk of B/W to the right
// neighbour while receiving one from the left.
double ring_seconds(const CompareModel& m, int W) {
  return 2.0 * (W - 1) * (m.alpha_s + m.bytes / W / m.beta_Bps);
}

// The tutorials' master-slave scheme: W-1 ranks send their whole buffer to the root, whose one
// link takes them one after the other; then the root sends the sum to each of them in turn.
double tree_seconds(const CompareModel& m, int W) {
  return 2.0 * (W - 1) * (m.alpha_s + m.bytes / m.beta_Bps);
}

// Every rank sends its whole buffer to each of the W-1 others (one at a time on its link) and
// reduces what it receives itself.
double all_to_all_seconds(const CompareModel& m, int W) {
  return (W - 1) * (m.alpha_s + m.bytes / m.beta_Bps);
}

std::string compare_table(const CompareModel& m) {
  std::string s = str(
      "All-reduce of B = %.0f bytes (%.3f MB) held by each of W ranks, in the alpha-beta model:\n"
      "a message of n bytes takes alpha + n/beta, with alpha = %.1f us (latency of one message)\n"
      "and beta = %.3f GB/s (bandwidth of one link). These are stated, not measured: about one\n"
      "TCP message over a 10-25 Gbit/s Ethernet link (change them with --alpha-us, --beta-gbs).\n"
      "Each rank sends one message at a time and receives while it sends; adds are free.\n\n",
      m.bytes, m.bytes / 1e6, m.alpha_s * 1e6, m.beta_Bps / 1e9);
  s += "  ring                T = 2(W-1) (alpha + B/(W beta))   each rank sends 2(W-1)/W x B\n"
       "                      reduce-scatter + all-gather: 2(W-1) steps, a chunk of B/W per link\n"
       "  reduce+broadcast    T = 2(W-1) (alpha + B/beta)       root sends (W-1) x B, others B\n"
       "                      the root's link takes W-1 whole buffers in, then W-1 out\n"
       "  all-to-all          T = (W-1) (alpha + B/beta)        each rank sends (W-1) x B\n"
       "                      every rank sends its whole buffer to every other rank\n\n";
  s += str("  %3s | %-23s | %-23s | %-23s | %s\n", "W", "ring: sent/rank, time",
           "reduce+bcast: root sent", "all-to-all: sent/rank", "ring faster than");
  s += str("  %3s | %-23s | %-23s | %-23s | %s\n", "", "", "", "", "r+b    a2a");
  for (int W = m.min_world; W <= m.max_world; ++W) {
    const double ring = ring_seconds(m, W), tree = tree_seconds(m, W),
                 a2a = all_to_all_seconds(m, W);
    s += str("  %3d | %s %s | %s %s | %s %s | x%-5.1f x%.1f\n", W,
             mb(2.0 * (W - 1) / W * m.bytes).c_str(), dur(ring).c_str(),
             mb((W - 1) * m.bytes).c_str(), dur(tree).c_str(), mb((W - 1) * m.bytes).c_str(),
             dur(a2a).c_str(), tree / ring, a2a / ring);
  }
  s += str(
      "\nThe ring's time stays near 2B/beta = %.4g ms however many ranks join, while the others "
      "grow\n"
      "with W: their busiest link carries (W-1) whole buffers. Its cost is 2(W-1) latencies, so "
      "for\n"
      "small buffers (try --bytes 10000) alpha dominates and fewer, larger messages win; that is\n"
      "why gradients are bucketed before the all-reduce.\n",
      2e3 * m.bytes / m.beta_Bps);
  return s;
}

}  // namespace engine::ring_demo
