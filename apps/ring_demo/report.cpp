// apps/ring_demo/report.cpp: see report.h.
#include "apps/ring_demo/report.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace engine::ring_demo {
namespace {

using comm::Range;
using comm::ReduceOp;
using comm::RingPhase;

// printf into a std::string of any length.
std::string str(const char* fmt, auto... args) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, fmt, args...)), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

std::string values(const std::vector<float>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ' ';
    out += format_value(v[i]);
  }
  return out + "]";
}

std::string range(Range r) {
  return str("[%zu,%zu)", r.begin, r.end);
}

}  // namespace

std::string format_value(float v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string format_buffer(const std::vector<float>& values, const std::vector<Range>& chunks) {
  std::string out = "|";
  for (const Range& c : chunks) {
    for (size_t i = c.begin; i < c.end; ++i) {
      out += ' ';
      out += format_value(values[i]);
    }
    out += " |";
  }
  return out;
}

std::string describe_intro(const DemoRun& run) {
  const Config& c = run.cfg;
  const int W = c.world;
  std::string s = str(
      "Ring all-reduce: %d rank%s (threads over the in-memory transport), %zu float32 per rank, "
      "op %s.\nThis is comm/'s real all_reduce, the code training uses; an observer hook in the "
      "ring reports\nevery step of every rank.\n\n",
      W, W == 1 ? "" : "s", c.count, op_words(c.op).name);
  s += W == 1 ? std::string("The buffer is one chunk:\n ")
              : str("Each rank cuts its buffer into %d chunks (sizes differ by at most one "
                    "element):\n ",
                    W);
  for (int k = 0; k < W; ++k) {
    s += str(" c%d = %s%s", k, range(run.chunks[k]).c_str(), run.chunks[k].size() ? "" : " empty");
    if (k % 8 == 7 && k + 1 < W) s += "\n ";
  }
  s += "\n";
  if (W > 1) {
    s +=
        str("The ranks form a ring: rank r sends only to its right neighbour r+1 and receives only "
            "from\n"
            "its left neighbour r-1 (mod %d). ",
            W);
    if (run.segments_per_chunk == 1)
      s += "One segment per chunk, so the steps happen one after another.\n";
    else
      s += str(
          "Each chunk travels as %zu segments (--segment): segment k of a step goes out as soon\n"
          "as segment k of the step before has arrived, so sending, receiving and adding "
          "overlap.\n",
          run.segments_per_chunk);
  }
  if (!run.values_shown)
    s += str("(%zu elements: steps are shown by element ranges; values only up to --count %zu.)\n",
             c.count, kShowValuesMax);
  return s + "\n";
}

std::string describe_phase(const DemoRun& run, size_t frame) {
  const int W = run.cfg.world;
  if (frame == 1)
    return str(
        "Phase 1: reduce-scatter, %d step%s. At step s rank r sends chunk (r-s) to the right and\n"
        "%s the chunk (r-s-1) arriving from the left into its own copy of it. Afterwards\n"
        "rank r holds chunk (r+1) mod %d reduced over all ranks.\n\n",
        W - 1, W == 2 ? "" : "s", op_words(run.cfg.op).verb, W);
  if (frame == static_cast<size_t>(W)) {
    std::string s = str(
        "Phase 2: all-gather, %d step%s. At step s rank r sends chunk (r+1-s): first the chunk it\n"
        "completed, then the one it just received. It stores the chunk (r-s) arriving from the\n"
        "left over its partial copy. Afterwards every rank holds every completed chunk.\n",
        W - 1, W == 2 ? "" : "s");
    if (run.cfg.op == ReduceOp::Avg) {
      s += str(
          "op avg: each owner divides its completed chunk by %d once, just before sending it.\n",
          W);
      if (run.segments_per_chunk > 1 && run.values_shown)
        s += "(Pipelined: the last reduce-scatter step above already showed some segments of the\n"
             "completed chunk divided, because each segment is divided just before it is sent.)\n";
    }
    return s + "\n";
  }
  return "";
}

std::string describe_frame(const DemoRun& run, size_t frame) {
  const Frame& f = run.frames[frame];
  std::string s;
  if (f.is_start) {
    s += run.cfg.values.empty() ? "start: rank r holds r*100 + i\n" : "start: the --values\n";
    if (run.values_shown)
      for (int r = 0; r < run.cfg.world; ++r)
        s += str("  rank %-2d %s\n", r, format_buffer(f.buffers[r], run.chunks).c_str());
    if (run.cfg.world == 1)
      s += "\nA ring of one rank has nothing to exchange: 0 steps, its buffer is the result.\n";
    return s + "\n";
  }
  s += f.title + "\n";
  const bool rs = f.phase == RingPhase::ReduceScatter;
  for (const Move& m : f.moves) {
    if (run.values_shown) {
      s += str("  rank %-2d sends c%d %s -> rank %d; gets c%d %s from rank %d, ", m.rank,
               m.send_chunk, values(m.sent_values).c_str(), m.to, m.recv_chunk,
               values(m.recv_values).c_str(), m.from);
      s += rs ? str("%s: c%d = %s\n", op_words(run.cfg.op).verb, m.recv_chunk,
                    values(m.result_values).c_str())
              : std::string("stores it\n");
      s += str("          %s\n", format_buffer(f.buffers[m.rank], run.chunks).c_str());
    } else {
      s += str("  rank %-2d sends c%d %s -> rank %d; gets c%d %s from rank %d, %s\n", m.rank,
               m.send_chunk, range(m.sent).c_str(), m.to, m.recv_chunk, range(m.received).c_str(),
               m.from, rs ? op_words(run.cfg.op).verb : "stores it");
    }
  }
  return s + "\n";
}

std::string describe_result(const DemoRun& run, bool* ok) {
  const Config& c = run.cfg;
  const int W = c.world;
  bool all = true;
  std::string s =
      str("Result, checked against the direct computation (element i = the %s over ranks of rank "
          "r's element i):\n",
          op_words(c.op).noun);
  for (int r = 0; r < W; ++r) {
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < c.count; ++i)
      if (!close_enough(run.initial, c.op, i, run.final[r][i], run.expected[r][i]) && !bad++)
        first_bad = i;
    all = all && bad == 0;
    const char* verdict = bad ? "MISMATCH" : "OK";
    if (run.values_shown) {
      s += str("  rank %-2d %s  %s\n", r, format_buffer(run.final[r], run.chunks).c_str(), verdict);
    } else {
      s += str("  rank %-2d %zu elements, %s", r, c.count, verdict);
      for (size_t i = 0; i < std::min<size_t>(c.count, 6); ++i)
        s += (i ? " " : "  first: ") + format_value(run.final[r][i]);
      s += "\n";
    }
    if (bad)
      s += str("          %zu wrong; first at element %zu: got %s, want %s\n", bad, first_bad,
               format_value(run.final[r][first_bad]).c_str(),
               format_value(run.expected[r][first_bad]).c_str());
  }
  if (!run.frames_match_final) {
    all = false;
    s += "MISMATCH: the frames shown above do not add up to the final buffers\n";
  }
  s += !all     ? std::string("MISMATCH\n\n")
       : W == 1 ? std::string("OK.\n\n")
                : str("All %d ranks OK.\n\n", W);

  const size_t nbytes = c.count * sizeof(float);
  s += str("Bytes each rank sent (payload; float32 = 4 B, so the buffer is %zu B):\n", nbytes);
  size_t total = 0;
  for (int r = 0; r < W; ++r) {
    s += str("  rank %-2d %zu B in %zu step%s", r, run.bytes_sent[r], run.steps_sent[r],
             run.steps_sent[r] == 1 ? "" : "s");
    if (run.segments_per_chunk > 1)
      s += str(" (%zu messages: %zu segments a step)", run.steps_sent[r] * run.segments_per_chunk,
               run.segments_per_chunk);
    s += "\n";
    total += run.bytes_sent[r];
  }
  const double ideal = 2.0 * (W - 1) / W * static_cast<double>(nbytes);
  const size_t want_total = 2 * static_cast<size_t>(W - 1) * nbytes;
  s += str("  ring optimum 2(W-1)/W x %zu B = %.6g B per rank; all ranks together %zu B", nbytes,
           ideal, total);
  s += total == want_total ? str(" = 2(W-1) x %zu B  OK\n", nbytes)
                           : str(", want 2(W-1) x %zu B = %zu B  MISMATCH\n", nbytes, want_total);
  if (c.count % W && W > 1)
    s += "  (chunks of unequal size: ranks that send the larger chunks more often send a little "
         "more)\n";
  all = all && total == want_total;
  if (ok) *ok = all;
  return s;
}

std::string full_report(const DemoRun& run, bool* ok) {
  std::string s = describe_intro(run);
  for (size_t k = 0; k < run.frames.size(); ++k)
    s += describe_phase(run, k) + describe_frame(run, k);
  return s + describe_result(run, ok);
}

}  // namespace engine::ring_demo
