// apps/train/profile.cpp: folds trace events into the --profile table.
//   layer rows: forward events named after modules ("conv1", "layer1.0") carry their flops;
//               backward events of leaf layers are labelled "<layer> <Op>Backward".
//   phase rows: data, forward, backward, gradient sync (allreduce wait / allreduce /
//               reduce+broadcast / broadcast buffers), optimizer.
// Backward GFLOP/s counts 2x the forward flops (input and weight gradients).
#include "apps/train/profile.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <iterator>
#include <map>
#include <vector>

#include "nn/json.h"

namespace engine::apps {
namespace {

struct Row {
  double fwd_us = 0, bwd_us = 0, flops = 0;
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

}  // namespace

std::string profile_table(const std::string& trace_json) {
  Json doc = Json::parse(trace_json);
  int64_t main_tid = -1;
  for (const Json& e : doc.at("traceEvents").items())
    if (e.at("ph").as_string() == "M" && e.at("pid").as_int() == 0 &&
        e.at("name").as_string() == "thread_name" && e.at("args").at("name").as_string() == "main")
      main_tid = e.at("tid").as_int();

  // Only what happens inside training steps counts (evaluation runs the same layers).
  std::vector<std::pair<double, double>> steps_at;  // (start, end) of each step, sorted
  for (const Json& e : doc.at("traceEvents").items())
    if (e.at("ph").as_string() == "X" && e.at("pid").as_int() == 0 &&
        e.at("tid").as_int() == main_tid && e.at("cat").as_string() == "step")
      steps_at.emplace_back(e.at("ts").as_double(),
                            e.at("ts").as_double() + e.at("dur").as_double());
  std::sort(steps_at.begin(), steps_at.end());
  auto in_step = [&](double ts) {
    auto it = std::upper_bound(steps_at.begin(), steps_at.end(), std::make_pair(ts, 1e300));
    return it != steps_at.begin() && ts < std::prev(it)->second;
  };

  std::vector<std::string> order;  // layers in first-seen (forward) order
  std::map<std::string, Row> layers;
  std::map<std::string, double> phase_us;
  int64_t steps = 0;
  for (const Json& e : doc.at("traceEvents").items()) {
    if (e.at("ph").as_string() != "X" || e.at("pid").as_int() != 0 ||
        e.at("tid").as_int() != main_tid)
      continue;
    const std::string name = e.at("name").as_string(), cat = e.at("cat").as_string();
    const double dur = e.at("dur").as_double();
    if (cat != "data" && cat != "step" && !in_step(e.at("ts").as_double())) continue;
    auto layer = [&](const std::string& n) -> Row& {
      if (!layers.count(n)) order.push_back(n);
      return layers[n];
    };
    if (cat == "step") {
      ++steps;
      phase_us["step"] += dur;
    } else if (cat == "forward" && name != "model" && name != "forward") {
      Row& r = layer(name);
      r.fwd_us += dur;
      if (const Json* f = e.find("args") ? e.at("args").find("flops") : nullptr)
        r.flops += f->as_double();
    } else if (cat == "backward" && name != "backward") {
      auto sp = name.find(' ');
      layer(sp == std::string::npos ? name : name.substr(0, sp)).bwd_us += dur;
    } else if (cat == "data" || cat == "optimizer" || cat == "comm" ||
               (cat == "forward" && name == "forward") ||
               (cat == "backward" && name == "backward")) {
      phase_us[name] += dur;
    }
  }
  if (steps == 0) return "profile: no training step was recorded\n";
  const double iter_us = phase_us["step"] + phase_us["data"];
  auto ms = [&](double us) { return us / 1000.0 / static_cast<double>(steps); };
  auto pct = [&](double us) { return iter_us > 0 ? 100.0 * us / iter_us : 0.0; };

  std::string out = line("Profile of rank 0, %lld steps (ms per step; share of step + data):\n",
                         static_cast<long long>(steps));
  out += line("  %-28s %9s %9s %7s %9s %9s\n", "layer", "fwd ms", "bwd ms", "share", "fwd GF/s",
              "bwd GF/s");
  for (const std::string& n : order) {
    const Row& r = layers[n];
    auto gf = [&](double flops, double us) {
      return us > 0 && flops > 0 ? line("%9.1f", flops / us / 1e3) : line("%9s", "-");
    };
    out += line("  %-28s %9.3f %9.3f %6.1f%% ", n.c_str(), ms(r.fwd_us), ms(r.bwd_us),
                pct(r.fwd_us + r.bwd_us)) +
           gf(r.flops, r.fwd_us) + " " + gf(2 * r.flops, r.bwd_us) + "\n";
  }
  out += line("  %-28s %9s %9s %7s\n", "phase", "ms", "", "share");
  for (const char* p : {"data", "broadcast buffers", "forward", "backward", "allreduce wait",
                        "allreduce", "reduce+broadcast", "optimizer"}) {
    auto it = phase_us.find(p);
    if (it == phase_us.end()) continue;
    out += line("  %-28s %9.3f %9s %6.1f%%\n", p, ms(it->second), "", pct(it->second));
  }
  out += line("  %-28s %9.3f %9s %6.1f%%\n", "step + data", ms(iter_us), "", 100.0);
  return out;
}

}  // namespace engine::apps
