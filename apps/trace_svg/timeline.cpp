// apps/trace_svg/timeline.cpp: see timeline.h.
#include "apps/trace_svg/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "core/error.h"
#include "nn/atomic_file.h"
#include "nn/json.h"

namespace engine::trace_svg {
namespace {

// An argument value as short text: numbers as written (ints exactly), strings bare.
std::string arg_text(const Json& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_int()) return std::to_string(v.as_int());
  if (v.is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v.as_double());
    return buf;
  }
  return v.dump();
}

std::vector<std::pair<std::string, std::string>> args_of(const Json& e) {
  std::vector<std::pair<std::string, std::string>> out;
  const Json* a = e.find("args");
  if (a && a->is_object())
    for (const auto& [k, v] : a->members()) out.push_back({k, arg_text(v)});
  return out;
}

const std::string& field_string(const Json& e, const char* key, size_t i, const std::string& src) {
  const Json* v = e.find(key);
  ENGINE_CHECK(v && v->is_string(), src, ": event ", i, " has no string \"", key, "\"");
  return v->as_string();
}

double field_number(const Json& e, const char* key, size_t i, const std::string& src) {
  const Json* v = e.find(key);
  ENGINE_CHECK(v && v->is_number(), src, ": event ", i, " has no number \"", key, "\"");
  return v->as_double();
}

// Depth and sequence number of every event on one thread: sorted by start (longer first on ties),
// an event is inside every earlier one that has not ended by its start.
void assign_depths(std::vector<Event>& evs) {
  std::sort(evs.begin(), evs.end(), [](const Event& a, const Event& b) {
    return a.start_us != b.start_us ? a.start_us < b.start_us : a.end_us > b.end_us;
  });
  std::vector<double> open_ends;
  std::map<std::pair<std::string, std::string>, int64_t> seen;
  for (Event& e : evs) {
    e.seq = seen[{e.name, e.category}]++;
    while (!open_ends.empty() && open_ends.back() <= e.start_us) open_ends.pop_back();
    e.depth = static_cast<int>(open_ends.size());
    open_ends.push_back(e.end_us);
  }
}

}  // namespace

Timeline parse_timeline(const std::string& text, const std::string& source) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Error& e) {
    ENGINE_FAIL(source, ": not valid JSON: ", e.what());
  }
  const Json* events = doc.is_object() ? doc.find("traceEvents") : nullptr;
  ENGINE_CHECK(events && events->is_array(), source,
               ": no \"traceEvents\" array (is this a trace written by train --trace?)");

  std::map<std::pair<int64_t, int64_t>, Lane> lanes;
  std::map<int64_t, std::string> process_names;
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& e = (*events)[i];
    ENGINE_CHECK(e.is_object(), source, ": event ", i, " is not an object");
    const Json* ph = e.find("ph");
    if (!ph || !ph->is_string()) continue;
    const int64_t pid = e.find("pid") && e.at("pid").is_int() ? e.at("pid").as_int() : 0;
    const int64_t tid = e.find("tid") && e.at("tid").is_int() ? e.at("tid").as_int() : 0;
    if (ph->as_string() == "M") {
      const Json* args = e.find("args");
      const Json* name = args && args->is_object() ? args->find("name") : nullptr;
      if (!name || !name->is_string() || !e.find("name")) continue;
      if (e.at("name") == Json("thread_name")) lanes[{pid, tid}].name = name->as_string();
      if (e.at("name") == Json("process_name")) process_names[pid] = name->as_string();
      continue;
    }
    if (ph->as_string() != "X") continue;
    Event ev;
    ev.name = field_string(e, "name", i, source);
    const Json* cat = e.find("cat");
    ev.category = cat && cat->is_string() ? cat->as_string() : "";
    ev.start_us = field_number(e, "ts", i, source);
    const double dur = field_number(e, "dur", i, source);
    ENGINE_CHECK(dur >= 0 && std::isfinite(dur) && std::isfinite(ev.start_us), source, ": event ",
                 i, " (\"", ev.name, "\") has a bad ts or dur");
    ev.end_us = ev.start_us + dur;
    ev.args = args_of(e);
    lanes[{pid, tid}].events.push_back(std::move(ev));
  }

  Timeline t;
  for (auto& [key, lane] : lanes) {
    if (lane.events.empty()) continue;  // a named thread that recorded nothing
    lane.pid = key.first;
    lane.tid = key.second;
    auto pn = process_names.find(lane.pid);
    const std::string process =
        pn != process_names.end() ? pn->second : "rank " + std::to_string(lane.pid);
    lane.name =
        process + " " + (lane.name.empty() ? "thread " + std::to_string(lane.tid) : lane.name);
    assign_depths(lane.events);
    t.lanes.push_back(std::move(lane));
  }
  ENGINE_CHECK(!t.lanes.empty(), source, ": no complete (\"ph\":\"X\") events");
  return t;
}

Timeline read_timeline(const std::string& path) {
  return parse_timeline(read_file(path), path);
}

Window step_window(const Timeline& t, int64_t first, int64_t last, const std::string& source) {
  std::vector<std::pair<double, double>> steps;
  int64_t rank = std::numeric_limits<int64_t>::max();
  for (const Lane& l : t.lanes) rank = std::min(rank, l.pid);
  for (const Lane& l : t.lanes) {
    if (l.pid != rank) continue;
    for (const Event& e : l.events)
      if (e.name == "step" && e.category == "step") steps.push_back({e.start_us, e.end_us});
  }
  std::sort(steps.begin(), steps.end());
  const auto n = static_cast<int64_t>(steps.size());
  ENGINE_CHECK(n > 0, source, ": no \"step\" events on rank ", rank,
               " (use --steps all to draw the whole trace)");
  ENGINE_CHECK(0 <= first && first <= last && last < n, source, ": --steps ", first, ":", last,
               " is outside the ", n, " steps of rank ", rank, " (0-based: 0:", n - 1, ")");
  Window w;
  w.start_us = steps[static_cast<size_t>(first)].first;
  w.end_us = steps[static_cast<size_t>(last)].second;
  w.label = (first == last ? "step " + std::to_string(first)
                           : "steps " + std::to_string(first) + "-" + std::to_string(last)) +
            " of rank " + std::to_string(rank);
  return w;
}

Window whole_window(const Timeline& t) {
  Window w{std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(),
           "whole trace"};
  for (const Lane& l : t.lanes)
    for (const Event& e : l.events) {
      w.start_us = std::min(w.start_us, e.start_us);
      w.end_us = std::max(w.end_us, e.end_us);
    }
  return w;
}

std::vector<Event> events_in(const Lane& lane, const Window& w, int* rows) {
  std::vector<Event> out;
  *rows = 0;
  for (const Event& e : lane.events) {
    if (e.end_us <= w.start_us || e.start_us >= w.end_us) continue;
    Event c = e;
    c.start_us = std::max(c.start_us, w.start_us);
    c.end_us = std::min(c.end_us, w.end_us);
    *rows = std::max(*rows, c.depth + 1);
    out.push_back(std::move(c));
  }
  return out;
}

double union_length(std::vector<std::pair<double, double>> spans) {
  std::sort(spans.begin(), spans.end());
  double total = 0, cur_lo = 0, cur_hi = 0;
  bool open = false;
  for (auto [lo, hi] : spans) {
    if (open && lo <= cur_hi) {
      cur_hi = std::max(cur_hi, hi);
      continue;
    }
    if (open) total += cur_hi - cur_lo;
    cur_lo = lo;
    cur_hi = hi;
    open = true;
  }
  if (open) total += cur_hi - cur_lo;
  return total;
}

}  // namespace engine::trace_svg
