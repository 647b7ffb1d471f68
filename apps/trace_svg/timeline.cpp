// apps/trace_svg/timeline.cpp: see timeline.h.
#include "apps/trace_svg/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"

namespace engine::trace_svg {
namespace {

// An argument value as short text: numbers as written (ints exactly), strings bare.
std::string arg_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return dump_json(v);
  if (v.is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v.get<double>());
    return buf;
  }
  return dump_json(v);
}

std::vector<std::pair<std::string, std::string>> args_of(const Json& e) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto a = e.find("args");
  if (a != e.end() && a->is_object())
    for (const auto& [k, v] : a->items()) out.push_back({k, arg_text(v)});
  return out;
}

// The member `key` of event e when it satisfies `is` (e.g. &Json::is_string), else nullptr.
const Json* member(const Json& e, const char* key, bool (Json::*is)() const noexcept) {
  const auto v = e.find(key);
  return v != e.end() && ((*v).*is)() ? &*v : nullptr;
}

const std::string& field_string(const Json& e, const char* key, size_t i, const std::string& src) {
  const Json* v = member(e, key, &Json::is_string);
  ENGINE_CHECK(v, src, ": event ", i, " has no string \"", key, "\"");
  return v->get_ref<const std::string&>();
}

double field_number(const Json& e, const char* key, size_t i, const std::string& src) {
  const Json* v = member(e, key, &Json::is_number);
  ENGINE_CHECK(v, src, ": event ", i, " has no number \"", key, "\"");
  return v->get<double>();
}

int64_t field_int_or_0(const Json& e, const char* key) {
  const Json* v = member(e, key, &Json::is_number_integer);
  return v ? v->get<int64_t>() : 0;
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
  const Json doc = parse_json(text, source);
  const Json* events = doc.is_object() ? member(doc, "traceEvents", &Json::is_array) : nullptr;
  ENGINE_CHECK(events, source,
               ": no \"traceEvents\" array (is this a trace written by train --trace?)");

  std::map<std::pair<int64_t, int64_t>, Lane> lanes;
  std::map<int64_t, std::string> process_names;
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& e = (*events)[i];
    ENGINE_CHECK(e.is_object(), source, ": event ", i, " is not an object");
    const Json* ph = member(e, "ph", &Json::is_string);
    if (!ph) continue;
    const int64_t pid = field_int_or_0(e, "pid"), tid = field_int_or_0(e, "tid");
    if (*ph == "M") {
      const Json* args = member(e, "args", &Json::is_object);
      const Json* name = args ? member(*args, "name", &Json::is_string) : nullptr;
      if (!name || !e.contains("name")) continue;
      if (e.at("name") == "thread_name") lanes[{pid, tid}].name = name->get<std::string>();
      if (e.at("name") == "process_name") process_names[pid] = name->get<std::string>();
      continue;
    }
    if (*ph != "X") continue;
    Event ev;
    ev.name = field_string(e, "name", i, source);
    const Json* cat = member(e, "cat", &Json::is_string);
    ev.category = cat ? cat->get<std::string>() : "";
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
