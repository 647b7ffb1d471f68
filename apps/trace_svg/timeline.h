// apps/trace_svg/timeline.h: a Chrome trace file (core/trace.h) read into lanes, one per
// (rank, thread), of complete events with their nesting depth; the window of steps A..B.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace engine::trace_svg {

struct Event {
  std::string name, category;
  std::vector<std::pair<std::string, std::string>> args;  // ("bucket", "3"), ... as text
  double start_us = 0, end_us = 0;
  int depth = 0;    // 0 = outermost on its thread; k = inside k open events
  int64_t seq = 0;  // earlier events of the same name and category on its thread: "step 4"
};

struct Lane {
  int64_t pid = 0, tid = 0;   // pid = rank
  std::string name;           // "rank 0 main"
  std::vector<Event> events;  // sorted by start, longer first on ties
};

// Lanes ordered by rank, then thread id (train's "main" comes before "comm").
struct Timeline {
  std::vector<Lane> lanes;
};

// Parses the text of a trace file; `source` (the file name) starts every error message.
// Throws engine::Error for bad JSON, no "traceEvents" array, or malformed "X" events.
Timeline parse_timeline(const std::string& text, const std::string& source);
// Reads and parses path; errors name it.
Timeline read_timeline(const std::string& path);

// A span of time to draw, in the trace's microseconds.
struct Window {
  double start_us = 0, end_us = 0;
  std::string label;  // "steps 4-5 of rank 0" or "whole trace"
};

// From the start of step `first` to the end of step `last` (0-based, in time order) of rank 0:
// the events named "step" of category "step" on its lanes. Throws naming source and the
// number of steps the trace has when the range does not fit.
Window step_window(const Timeline& t, int64_t first, int64_t last, const std::string& source);
// First start to last end over every event.
Window whole_window(const Timeline& t);

// Events of `lane` that intersect w (clipped to it), and the deepest depth among them + 1.
std::vector<Event> events_in(const Lane& lane, const Window& w, int* rows);

// Measure (total length) of the union of intervals; used for overlap statistics.
double union_length(std::vector<std::pair<double, double>> spans);

}  // namespace engine::trace_svg
