// report/profile.cpp: folds trace events into the --profile table. Events of one thread nest
// (core/trace.h's scopes), and each training step is read as a tree:
//   step -> phases: data, forward, backward, gradient sync (allreduce wait / allreduce /
//           reduce+broadcast / broadcast buffers), optimizer; "other" is the step's time in none.
//   forward -> layer rows: the outermost events below the model that contain no layer with flops:
//           leaf modules ("conv1", "layer1.0", carrying their flops) and ops called outside
//           them ("max_pool2d_relu"); an op inside a module ("conv2d_pool" in conv1) is part of
//           its row, a container ("layer1") is read through.
//   backward -> its direct events, labelled "<layer> <Op>Backward" for leaf layers.
// Each phase's time outside its rows is the "other" layer row: the rows add up to the phases, and
// the phases' shares to 100%. Backward GFLOP/s counts the event's "bwd_flops": 2x the forward
// flops (input and weight gradients), 1x for a first layer, whose input needs no gradient.
#include "report/profile.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <vector>

#include "io/json.h"

namespace engine::report {
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

// A complete event of the main thread and the events nested in it.
struct Node {
  const Json* e = nullptr;
  std::string name, cat;
  double ts = 0, dur = 0;
  std::vector<Node> children;
  bool has_flops() const {
    const auto args = e->find("args");
    return args != e->end() && args->contains("flops");
  }
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

// The complete events ("ph":"X") of rank 0's thread tid as trees, in time order: an event that
// starts inside another (on one thread, scopes nest) is its child.
std::vector<Node> event_trees(const Json& events, int64_t tid) {
  std::vector<Node> flat;
  for (const Json& e : events)
    if (e.at("ph") == "X" && e.at("pid") == 0 && e.at("tid") == tid)
      flat.push_back({&e,
                      e.at("name").get<std::string>(),
                      e.at("cat").get<std::string>(),
                      e.at("ts").get<double>(),
                      e.at("dur").get<double>(),
                      {}});
  std::stable_sort(flat.begin(), flat.end(), [](const Node& a, const Node& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;  // a parent before its first child
  });
  std::vector<Node> roots;
  std::vector<Node*> open;  // the chain of events the next one may be inside
  for (Node& n : flat) {
    while (!open.empty() && n.ts >= open.back()->ts + open.back()->dur) open.pop_back();
    std::vector<Node>& siblings = open.empty() ? roots : open.back()->children;
    siblings.push_back(std::move(n));
    open.push_back(&siblings.back());  // siblings never grow again while their parent is open
  }
  return roots;
}

// Whether a layer with flops is at or below n: then n is a container, read through.
bool holds_a_layer(const Node& n) {
  if (n.has_flops()) return true;
  return std::any_of(n.children.begin(), n.children.end(),
                     [](const Node& c) { return holds_a_layer(c); });
}

Row& layer(Profile& p, const std::string& n) {
  if (!p.layers.count(n)) p.order.push_back(n);
  return p.layers[n];
}

// The layer rows below a forward event (the phase, the model, a container); returns their time.
double add_forward_rows(Profile& p, const Node& parent) {
  double rows_us = 0;
  for (const Node& c : parent.children) {
    if (c.cat != "forward") continue;
    if (!c.has_flops() && holds_a_layer(c)) {
      rows_us += add_forward_rows(p, c);
      continue;
    }
    Row& r = layer(p, c.name);
    r.fwd_us += c.dur;
    rows_us += c.dur;
    if (c.has_flops()) {
      const Json& args = c.e->at("args");
      r.flops += args.at("flops").get<double>();
      r.bwd_flops += args.value("bwd_flops", 2 * args.at("flops").get<double>());
    }
  }
  return rows_us;
}

// The backward phase's events, each its layer's ("conv1 ConvolutionBackward" -> conv1).
double add_backward_rows(Profile& p, const Node& phase) {
  double rows_us = 0;
  for (const Node& c : phase.children) {
    const auto sp = c.name.find(' ');
    layer(p, sp == std::string::npos ? c.name : c.name.substr(0, sp)).bwd_us += c.dur;
    rows_us += c.dur;
  }
  return rows_us;
}

void add_step(Profile& p, const Node& step) {
  ++p.steps;
  p.phase_us["step"] += step.dur;
  for (const Node& c : step.children) {
    const bool forward = c.cat == "forward" && c.name == "forward";
    const bool backward = c.cat == "backward" && c.name == "backward";
    if (forward || backward || c.cat == "data" || c.cat == "optimizer" || c.cat == "comm")
      p.phase_us[c.name] += c.dur;
    if (forward) layer(p, "other").fwd_us += c.dur - add_forward_rows(p, c);
    if (backward) layer(p, "other").bwd_us += c.dur - add_backward_rows(p, c);
  }
}

// Steps from t0 on and the data loading between them; the rest (evaluation) is left out.
void add_events(Profile& p, const std::vector<Node>& nodes, double t0) {
  for (const Node& n : nodes) {
    if (n.cat == "step") {
      if (n.ts >= t0) add_step(p, n);
    } else if (n.cat == "data") {
      if (n.ts >= t0) p.phase_us[n.name] += n.dur;
    } else {
      add_events(p, n.children, t0);
    }
  }
}

// Start times of the training steps, sorted.
void step_starts(const std::vector<Node>& nodes, std::vector<double>* out) {
  for (const Node& n : nodes) {
    if (n.cat == "step")
      out->push_back(n.ts);
    else
      step_starts(n.children, out);
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
  std::vector<std::string> order = p.order;  // "other" last
  std::stable_partition(order.begin(), order.end(),
                        [](const std::string& n) { return n != "other"; });
  for (const std::string& n : order) {
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
  double listed_us = 0;
  for (const char* ph : {"data", "broadcast buffers", "forward", "backward", "allreduce wait",
                         "allreduce", "reduce+broadcast", "optimizer"}) {
    auto it = p.phase_us.find(ph);
    if (it == p.phase_us.end()) continue;
    out += line("  %-28s %9.3f %9s %6.1f%%\n", ph, ms(it->second), "", pct(it->second));
    listed_us += it->second;
  }
  // The step's time in none of them (zero_grad, the loss's read-back, other comm).
  const double other_us = iter_us - listed_us;
  out += line("  %-28s %9.3f %9s %6.1f%%\n", "other", ms(other_us), "", pct(other_us));
  out += line("  %-28s %9.3f %9s %6.1f%%\n", "step + data", ms(iter_us), "", 100.0);
  return out;
}

}  // namespace

std::string profile_table(const std::string& trace_json, double fma_peak_gflops, int peak_threads) {
  const Json doc = parse_json(trace_json, "the run's trace");
  const std::vector<Node> trees =
      event_trees(doc.at("traceEvents"), main_thread(doc.at("traceEvents")));
  // Only what happens inside training steps counts (evaluation runs the same layers).
  std::vector<double> starts;
  step_starts(trees, &starts);
  std::sort(starts.begin(), starts.end());
  // Warm-up, left out as torch.profiler's schedule does: a tenth of the steps, at most 5, from 10
  // steps on (first touches of fresh memory, cuDNN's algorithm search).
  const size_t warmup = starts.size() >= 10 ? std::min<size_t>(5, starts.size() / 10) : 0;
  Profile p;
  p.warmup = static_cast<int64_t>(warmup);
  add_events(p, trees, warmup > 0 ? starts[warmup] : -1e300);
  if (p.steps == 0) return "profile: no training step was recorded\n";
  return format_table(p, fma_peak_gflops, peak_threads);
}

}  // namespace engine::report
