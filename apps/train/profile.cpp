// apps/train/profile.cpp: folds trace events into the --profile table.
//   layer rows: forward events named after modules ("conv1", "layer1.0") carry their flops;
//               backward events of leaf layers are labelled "<layer> <Op>Backward".
//   phase rows: data, forward, backward, gradient sync (allreduce wait / allreduce /
//               reduce+broadcast / broadcast buffers), optimizer.
// Backward GFLOP/s counts the event's "bwd_flops": 2x the forward flops (input and weight
// gradients), 1x for a first layer, whose input needs no gradient.
#include "apps/train/profile.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <iterator>
#include <map>
#include <vector>

#include "io/json.h"

namespace engine::apps {
namespace {

struct Row {
  double fwd_us = 0, bwd_us = 0, flops = 0, bwd_flops = 0;
};

// What the events of training steps add up to.
struct Profile {
  std::vector<std::string> order;  // layers in first-seen (forward) order
  std::map<std::string, Row> layers;
  std::map<std::string, double> phase_us;
  int64_t steps = 0;
  int64_t warmup = 0;  // steps left out before these
};

std::string line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// The tid of rank 0's thread named "main", or -1.
int64_t main_thread(const Json& events) {
  for (const Json& e : events)
    if (e.at("ph") == "M" && e.at("pid") == 0 && e.at("name") == "thread_name" &&
        e.at("args").at("name") == "main")
      return e.at("tid").get<int64_t>();
  return -1;
}

// A complete event ("ph":"X") on rank 0's thread tid.
bool complete_on(const Json& e, int64_t tid) {
  return e.at("ph") == "X" && e.at("pid") == 0 && e.at("tid") == tid;
}

// (start, end) of each training step on thread tid, sorted.
std::vector<std::pair<double, double>> step_spans(const Json& events, int64_t tid) {
  std::vector<std::pair<double, double>> out;
  for (const Json& e : events)
    if (complete_on(e, tid) && e.at("cat") == "step") {
      const double ts = e.at("ts").get<double>();
      out.emplace_back(ts, ts + e.at("dur").get<double>());
    }
  std::sort(out.begin(), out.end());
  return out;
}

bool in_step(const std::vector<std::pair<double, double>>& steps, double ts) {
  auto it = std::upper_bound(steps.begin(), steps.end(), std::make_pair(ts, 1e300));
  return it != steps.begin() && ts < std::prev(it)->second;
}

void add_event(Profile& p, const Json& e) {
  const std::string name = e.at("name").get<std::string>(), cat = e.at("cat").get<std::string>();
  const double dur = e.at("dur").get<double>();
  auto layer = [&](const std::string& n) -> Row& {
    if (!p.layers.count(n)) p.order.push_back(n);
    return p.layers[n];
  };
  if (cat == "step") {
    ++p.steps;
    p.phase_us["step"] += dur;
  } else if (cat == "forward" && name != "model" && name != "forward") {
    Row& r = layer(name);
    r.fwd_us += dur;
    const auto args = e.find("args");
    if (args != e.end() && args->contains("flops")) {
      r.flops += args->at("flops").get<double>();
      r.bwd_flops += args->value("bwd_flops", 2 * args->at("flops").get<double>());
    }
  } else if (cat == "backward" && name != "backward") {
    auto sp = name.find(' ');
    layer(sp == std::string::npos ? name : name.substr(0, sp)).bwd_us += dur;
  } else if (cat == "data" || cat == "optimizer" || cat == "comm" ||
             (cat == "forward" && name == "forward") || (cat == "backward" && name == "backward")) {
    p.phase_us[name] += dur;
  }
}

std::string format_table(Profile& p, double peak, int peak_threads) {
  const double iter_us = p.phase_us["step"] + p.phase_us["data"];
  auto ms = [&](double us) { return us / 1000.0 / static_cast<double>(p.steps); };
  auto pct = [&](double us) { return iter_us > 0 ? 100.0 * us / iter_us : 0.0; };

  std::string out =
      p.warmup > 0
          ? line(
                "Profile of rank 0, %lld steps after %lld warm-up steps (ms per step; share of "
                "step + data):\n",
                static_cast<long long>(p.steps), static_cast<long long>(p.warmup))
          : line("Profile of rank 0, %lld steps (ms per step; share of step + data):\n",
                 static_cast<long long>(p.steps));
  if (peak > 0)
    out += line("FP32 limit: %.1f GFLOP/s, the FMA peak measured on %d thread(s) after the run\n",
                peak, peak_threads);
  out += line("  %-28s %9s %9s %7s %9s %9s", "layer", "fwd ms", "bwd ms", "share", "fwd GF/s",
              "bwd GF/s");
  out += peak > 0 ? line(" %7s %7s\n", "fwd %pk", "bwd %pk") : "\n";
  for (const std::string& n : p.order) {
    const Row& r = p.layers[n];
    auto gf = [&](double flops, double us) {
      return us > 0 && flops > 0 ? line("%9.1f", flops / us / 1e3) : line("%9s", "-");
    };
    auto pk = [&](double flops, double us) {
      return us > 0 && flops > 0 ? line(" %6.1f%%", 100 * flops / us / 1e3 / peak)
                                 : line(" %7s", "-");
    };
    out += line("  %-28s %9.3f %9.3f %6.1f%% ", n.c_str(), ms(r.fwd_us), ms(r.bwd_us),
                pct(r.fwd_us + r.bwd_us)) +
           gf(r.flops, r.fwd_us) + " " + gf(r.bwd_flops, r.bwd_us) +
           (peak > 0 ? pk(r.flops, r.fwd_us) + pk(r.bwd_flops, r.bwd_us) : "") + "\n";
  }
  out += line("  %-28s %9s %9s %7s\n", "phase", "ms", "", "share");
  for (const char* ph : {"data", "broadcast buffers", "forward", "backward", "allreduce wait",
                         "allreduce", "reduce+broadcast", "optimizer"}) {
    auto it = p.phase_us.find(ph);
    if (it == p.phase_us.end()) continue;
    out += line("  %-28s %9.3f %9s %6.1f%%\n", ph, ms(it->second), "", pct(it->second));
  }
  out += line("  %-28s %9.3f %9s %6.1f%%\n", "step + data", ms(iter_us), "", 100.0);
  return out;
}

}  // namespace

std::string profile_table(const std::string& trace_json, double fma_peak_gflops, int peak_threads) {
  const Json doc = parse_json(trace_json, "the run's trace");
  const Json& events = doc.at("traceEvents");
  const int64_t tid = main_thread(events);
  // Only what happens inside training steps counts (evaluation runs the same layers).
  const auto steps = step_spans(events, tid);
  // Warm-up, left out as torch.profiler's schedule does: a tenth of the steps, at most 5, from 10
  // steps on (first touches of fresh memory, cuDNN's algorithm search).
  const size_t warmup = steps.size() >= 10 ? std::min<size_t>(5, steps.size() / 10) : 0;
  const double t0 = warmup > 0 ? steps[warmup].first : -1e300;
  Profile p;
  p.warmup = static_cast<int64_t>(warmup);
  for (const Json& e : events) {
    if (!complete_on(e, tid)) continue;
    const Json& cat = e.at("cat");
    const double ts = e.at("ts").get<double>();
    if (ts < t0) continue;
    if (cat != "data" && cat != "step" && !in_step(steps, ts)) continue;
    add_event(p, e);
  }
  if (p.steps == 0) return "profile: no training step was recorded\n";
  return format_table(p, fma_peak_gflops, peak_threads);
}

}  // namespace engine::apps
